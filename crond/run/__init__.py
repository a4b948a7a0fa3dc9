"""One run of one job: what to run, the child process, its output, and the policy.

- `runner`: the Run, which strings attempts into a run (retries, stop, kill) and is
  driven in its owner's TaskGroup; what callers need of the rest is re-exported there;
- `spec`: the RunSpec, made once per load (argv, environment, user, PATH lookup);
- `attempt`: one attempt's policy: when it is stopped, its outcome, its events;
- `process`: the mechanism: spawn in a new session, exit through a pidfd, TERM to the
  group then KILL, reaping; knows nothing of outcomes, events or the store;
- `output`: the pipes of a child into `job.output` events, bounded;
- `watch`: the one epoll of the children's pipes and pidfds;
- `procfs`: what /proc says of a process (also read by the PID-1 reaper);
- `bootstrap`: the child side of a `python:` job.
"""
