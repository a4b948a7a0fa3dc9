"""The process that runs the schedule: lifecycle, the loop around the plan, heartbeat.

- `lifecycle`: start, signals (HUP reload, TERM drain), the state store's opening,
  `crond run` and `crond run-job`;
- `loop`: the async loop around `when.plan`: sleep, wake, plan, hand slots to the runner;
- `liveness` and `systemd`: the heartbeat's outputs (the liveness file; sd_notify);
- `reaper`: orphans reaped when crond is PID 1.
"""
