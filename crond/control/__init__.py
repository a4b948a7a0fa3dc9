"""Steering the running daemon: the control socket that `crond ps`, `trigger`, `kill`,
`pause` and `resume` talk to (protocol.py: what is said; server.py: the daemon's end;
socketfile.py: its socket's file; callers.py: who is on the other end; client.py: the
commands' end; where.py: where the socket is)."""
