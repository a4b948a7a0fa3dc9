"""What running a job means, computed once per config load: the `RunSpec`.

`spec_for` turns a loaded job into its argv, its environment (the user's, for `user:`),
the program found on PATH and the ids to switch to, so that a spawn has nothing left to
compute. A problem of the host (no such user, not root) is not raised: it is kept in
`error`, and every attempt fails with it (exit code 126).

- `command: "a string"` runs as `/bin/sh -c "a string"`; `command: [prog, ...]` is exec'd
  directly, `prog` looked up on the job's PATH here (and again at each spawn while not
  found); a relative path with a `/` is relative to the workdir.
- `python:` jobs run the bootstrap (bootstrap.py) in `interpreter`.
- The environment is the daemon's, then `user`'s HOME/USER/LOGNAME/SHELL (and nothing
  else of the daemon's but the locale and TZ), then the job's `env`. The CROND_*
  variables of each attempt are added at its spawn (attempt.py).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from crond.config.loaded import LoadedJob
from crond.config.model import Output, Retry
from crond.run.bootstrap import BOOTSTRAP


@dataclass(frozen=True)
class RunSpec:
    """Everything about running a job that is computed once per config load."""

    job: str
    argv: tuple[str, ...]
    env: Mapping[str, str]  # the daemon's environment + the job's env, no CROND_* yet
    cwd: str | None = None
    timeout: float | None = None
    kill_after: float = 10.0
    output: Output = Output.LOG
    retry: Retry = field(default_factory=Retry)
    user: str | None = None
    uid: int | None = None  # set only when the daemon must switch to `user`
    gid: int | None = None
    groups: tuple[int, ...] | None = None
    home: str | None = None
    executable: str | None = None  # argv[0] found on PATH; None: look again at each spawn
    error: str | None = None  # known before spawning: each attempt fails with it (126)


# What a `user:` job keeps of the daemon's environment, and the PATH it gets (cron's).
_KEPT_FOR_USER: Final = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")
_USER_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


def spec_for(job: LoadedJob, base_env: Mapping[str, str] | None = None) -> RunSpec:
    """The RunSpec of `job`; never raises for a problem of the host (see `error`).
    `base_env` is shared, not copied, by the specs of the jobs that add nothing to it
    (the daemon caches a spec per job that has run: a copy each of an environment of 34
    variables was 1.1 kB a job, 11 MB once 10,000 jobs have run)."""
    env: Mapping[str, str] = dict(os.environ) if base_env is None else base_env
    uid = gid = home = error = None
    groups: tuple[int, ...] | None = None
    if job.settings.user is not None:
        account, error = _account(job.settings.user)
        if account is not None:
            home = account.pw_dir
            # Another user's job starts from a clean environment, as login and cron give
            # it: the daemon's variables (secrets included) are not handed across.
            env = {k: env[k] for k in _KEPT_FOR_USER if k in env} | {
                "PATH": _USER_PATH,
                "HOME": home,
                "USER": account.pw_name,
                "LOGNAME": account.pw_name,
                "SHELL": account.pw_shell or "/bin/sh",
            }
            if os.geteuid() == 0:
                uid, gid = account.pw_uid, account.pw_gid
                groups = tuple(os.getgrouplist(account.pw_name, account.pw_gid))
    if job.settings.env:
        env = {**env, **job.settings.env}
    argv = _argv(job)
    return RunSpec(
        job=job.name,
        argv=argv,
        env=env,
        cwd=job.settings.workdir,
        timeout=None if job.settings.timeout is None else job.settings.timeout.total_seconds(),
        kill_after=job.settings.kill_after.total_seconds(),
        output=job.settings.output,
        retry=job.settings.retry,
        user=job.settings.user,
        uid=uid,
        gid=gid,
        groups=groups,
        home=home,
        executable=which(argv[0], env),
        error=error,
    )


def which(program: str, env: Mapping[str, str]) -> str | None:
    """`program` as it will be exec'd: found on `env`'s PATH, or None."""
    if "/" in program:  # a path: exec'd as is, relative to the workdir
        return program
    return shutil.which(program, path=env.get("PATH", os.defpath))


def _argv(job: LoadedJob) -> tuple[str, ...]:
    if isinstance(job.settings.command, str):
        return ("/bin/sh", "-c", job.settings.command)
    if job.settings.command is not None:
        return tuple(job.settings.command)
    settings = job.settings
    assert settings.python is not None  # config guarantees command or python
    args, kwargs = json.dumps(settings.args or []), json.dumps(settings.kwargs or {})
    return (settings.interpreter or sys.executable, "-c", BOOTSTRAP, settings.python, args, kwargs)


def _account(user: str) -> tuple[pwd.struct_passwd | None, str | None]:
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        return None, f"crond: cannot run as user {user!r}: no such user on this host"
    if os.geteuid() not in (0, account.pw_uid):
        me = pwd.getpwuid(os.geteuid()).pw_name
        return None, (
            f"crond: cannot run as user {user!r}: the daemon runs as {me!r}, and only "
            "root can switch users (run crond as root, or remove `user`)"
        )
    return account, None
