"""One run of one job: what to run, the child process, its output, and the policy.

- `runner`: the RunSpec made once per load (argv, environment, user), and the Run,
  which strings attempts into a run (retries, stop, kill);
- `child`: one attempt's process: spawn, exit through a pidfd, TERM to the group then
  KILL, reaping, outcome, and its events;
- `output`: the pipes of a child into `job.output` events, bounded;
- `bootstrap`: the child side of a `python:` job.
"""
