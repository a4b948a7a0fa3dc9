"""The process that runs the schedule: lifecycle, the loop around the core, heartbeat.

- `lifecycle`: start and shutdown, `crond run`: the `Service` that builds the parts below
  and is the loop's `Effects`;
- `signals`: what the signals do (HUP reload, TERM drain), and `crond reload`;
- `spawning`: the spawn path of the runs: their environment, specs and run ids;
- `loop`: the shell around the scheduling core (crond/schedule/): sleep until its
  wake, claim once, carry out its actions (spawn runs, log, tell) through `Effects`;
- `recorder`: the daemon's policy for its state store: what is written, and when;
- `stores`: which store it opens, and how a failing one degrades and recovers, opening
  and reopening it;
- `view`: what the store keeps of the schedule: the jobs' view, `@reboot` marks;
- `heartbeat`: what the loop does every heartbeat: the watchdog ping, the store's
  check or reopen, the liveness file (written by `liveness`; sd_notify by `systemd`);
- `pausing`: the pauses the control socket begins and ends (`control`: its commands);
- `telling`: the notifiers, pings and metrics' counts; `serving`: /metrics and /healthz;
- `cluster`: with replicas, the other replicas seen through the database (`polling`:
  its once-a-second poll of pauses and kill requests);
- `reaper`: orphans reaped when crond is PID 1.
"""
