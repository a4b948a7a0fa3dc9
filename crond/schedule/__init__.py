"""The scheduling core, without IO: the due heap, the rules of due slots, pauses, the
daemon's queue and unclaimed starts (`core.Core`: propose, settle, wake_at); its actions
are frozen values (`actions`) carried out by crond/daemon/loop.py."""
