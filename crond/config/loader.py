"""The schedules file from bytes to a LoadedConfig: the one way in, for `validate`,
`next`, `run` and every reload. It returns a LoadedConfig or raises one ConfigError
that holds every located problem at once.

The pipeline: read the file (`load_file`: as root, by the ownership rule, from one
descriptor), parse the YAML with every place located (`yamlsource`), merge `defaults`
into each job (`defaults`), validate with the models of `model` and check the names the
file gives and uses (`names`), and wrap each job with its name and parsed cron
(`loaded`); as root, `load_file` then checks the control socket's directory.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
import os
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from crond import ownership
from crond.clock import SystemClock
from crond.config import (
    calendar_build,
    database,
    model,
    notifiers,
    places,
    waits,
    yamlsource,
)
from crond.config.defaults import defaults_too_big, file_zone, good_defaults, merge_all
from crond.config.loaded import LoadedConfig, LoadedJob, notifier_spec
from crond.config.model import Config
from crond.config.names import check_names, check_subscriptions
from crond.config.problems import (
    ConfigError,
    Problem,
    capped,
    is_secret,
    problems_from_validation,
)
from crond.config.schedfields import cron_texts
from crond.config.secrets import expand
from crond.config.wording import MAX_PROBLEMS
from crond.when.cronexpr import CronExpr

STDIN = Path("-")  # `crond validate -`: the file comes on standard input


def load_file(
    path: Path,
    *,
    enforce: bool = True,
    stdin: bool = False,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
) -> tuple[LoadedConfig, str]:
    """The file's LoadedConfig and the sha256 of the bytes validated. `enforce`: as root,
    the ownership rule (for the commands that run jobs). `stdin`: the file is standard
    input instead (`crond validate -`), named <stdin> in messages. `environ` and
    `strict`: as for `loads`. Raises ConfigError."""
    name = "<stdin>" if stdin else str(path)
    try:
        raw = _stdin() if stdin else ownership.read_schedules_file(path, enforce=enforce)
        text = raw.decode("utf-8")
    except ownership.FileRefused as exc:
        raise ConfigError([Problem(name, 0, 0, "", exc.message)]) from None
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text (byte {exc.start})"
        raise ConfigError([Problem(name, 0, 0, "", message)]) from None
    loaded = loads(text, name, environ=environ, strict=strict, enforce=enforce)
    if enforce:
        _check_socket(loaded, name)
    return loaded, hashlib.sha256(raw).hexdigest()


def _check_socket(loaded: LoadedConfig, name: str) -> None:
    """As root, a `daemon.control_socket` in a directory others can write (docs/
    control.md) is refused with the file: at start, on reload, by `validate`."""
    configured = loaded.daemon.control_socket
    if configured is None or configured.strip().lower() == "none":
        return
    problem = ownership.socket_problem(Path(configured).expanduser())
    if problem is not None:
        raise ConfigError([Problem(name, 0, 0, "daemon.control_socket", problem)])


def _stdin() -> bytes:
    try:
        raw = sys.stdin.buffer.read(ownership.MAX_BYTES + 1)
    except (OSError, AttributeError, ValueError) as exc:  # closed, or not readable
        raise ownership.FileRefused(STDIN, f"standard input cannot be read ({exc})") from None
    if len(raw) > ownership.MAX_BYTES:
        size = ownership.MAX_BYTES // (1024 * 1024)
        raise ownership.FileRefused(STDIN, f"too large (more than {size} MiB)")
    return raw


# The only places a valid file needs after its load: its `cron` lines (validate's DST
# warnings). A file with a mistake is read again, every node located (`_validated`).
_KEPT_PLACES = frozenset({"cron", "at"})


class _PlacesNeeded(Exception):  # noqa: N818  (a signal, not an error)
    """The first pass found something to report that is not an error (a `${NAME}` not
    set, with strict=False; a replica setting without a database; a password in the
    database's URL): the located pass reports it with its place."""


def loads(
    text: str,
    filename: str = "<string>",
    *,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
    enforce: bool = False,
    now: datetime | None = None,
) -> LoadedConfig:
    """Parse and validate a schedules file's text; raise ConfigError with every problem.

    `${NAME}`s (in notifiers and pings, docs/alerting.md) are expanded from `environ`,
    by default crond's own environment. A name that is not set there is an error with
    `strict` (`crond run`: a notifier without its token would fail at the worst time);
    otherwise a warning in `env_warnings`, the text kept as written (`crond validate`
    on a machine without the secrets). A replica setting that changes nothing, for want
    of a database (docs/replicas.md), is a warning there too, strict or not.

    `enforce`: an `ics` calendar's file is read by the ownership rule, as the file is
    (load_file's). `now` (default: the clock's): a job whose calendars leave it no fire
    within 10 years of it is refused."""
    when = SystemClock().now() if now is None else now
    context = _Context(os.environ if environ is None else environ, strict, enforce, when)
    with gc_paused():
        first = yamlsource.parse(text, keep=_KEPT_PLACES)
        if not first.problems:  # with problems, the pass below finds them, located
            try:
                return _validated(first, filename, context, located=False)
            except (ConfigError, _PlacesNeeded):
                pass
        del first
        # raises, or says what is not set, located
        return _validated(yamlsource.parse(text), filename, context, located=True)


class _Context(NamedTuple):
    environ: Mapping[str, str]
    strict: bool
    enforce: bool
    now: datetime


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while building many objects that will live long (a
    load; the daemon's scheduler entries for it).

    A load allocates ~10 container objects per job and frees few: CPython's collector
    would scan the growing heap again and again, and the data holds no cycles worth
    collecting early (10,000 jobs, fresh processes, medians of 6: `loads` 0.155 s with
    this, 0.176 s without; measured again when the loader became one YAML reader). Afterwards,
    the survivors would still be scanned by the next young collection, then the next
    middle one (~0.1 s): freeze+unfreeze puts every tracked object straight into the
    oldest generation instead (a list splice, as documented), to wait there for the next
    full collection. Skipped when someone froze objects on purpose: unfreeze would undo
    that.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _validated(
    source: places.Source, filename: str, context: _Context, *, located: bool
) -> LoadedConfig:
    """The Config of parsed `source`, or ConfigError with every problem, located
    (`located`: `source` has every node's place; else _PlacesNeeded when one is needed
    for a warning)."""
    problems = [_source_problem(p, filename) for p in source.problems]
    data = source.data
    if not problems:
        shape = _top_level_shape(data)
        if shape:
            raise ConfigError([Problem.at(filename, places.Mark(1, 1), (), shape)])
    if not isinstance(data, dict):
        raise ConfigError(capped(problems, filename))
    # Top-level `x-` keys are the file's own (as in Compose files): a place for anchors
    # that jobs merge (`x-common: &common {...}`, then `<<: *common`). crond ignores them.
    data = {key: value for key, value in data.items() if not str(key).startswith("x-")}
    jobs = data.get("jobs")
    checks = {model.CRONS: {}, model.ENVIRON: context.environ}
    unset = notifiers.unset_names(
        data.get("notifiers"), jobs, data.get("defaults"), context.environ
    )
    unused = database.without_database(data, jobs, context.environ)
    password = database.password_written(data)
    if (unset or unused or password) and not located:
        raise _PlacesNeeded
    unset_problems = _unset_problems(unset, source, filename, context.environ)
    if context.strict:
        problems += unset_problems
    if isinstance(jobs, dict):
        defaults = good_defaults(data.get("defaults"), checks)
        copies = len(jobs) + sum(1 for where, _ in source.duplicates if where[:1] == ("jobs",))
        too_big = defaults_too_big(defaults, copies, source, filename)
        if too_big:
            raise ConfigError(capped([*problems, too_big], filename))
        zone = file_zone(data.get("timezone", "UTC"))
        data["jobs"] = merge_all(defaults, jobs, zone)
        problems += _duplicate_problems(source, filename, defaults, zone, checks)
    crons: dict[str, CronExpr] = {}
    try:
        config = Config.model_validate(data, context={**checks, model.CRONS: crons})
    except ValidationError as exc:
        problems += problems_from_validation(exc, source, filename, data)
        config = None
    problems += _name_problems(data, jobs, source, filename)
    if problems or config is None:
        raise ConfigError(capped(problems, filename))
    unused_problems = [
        Problem.at(filename, source.locate(path, key=True), path, message)
        for path, message in itertools.islice(unused, MAX_PROBLEMS + 1)
    ]
    unused_problems += [Problem.at(filename, source.locate(p), p, m) for p, m in password]
    warnings = capped([*([] if context.strict else unset_problems), *unused_problems], filename)
    return _loaded(config, source, filename, crons, context, env_warnings=warnings)


def _name_problems(
    data: dict[Any, Any],
    jobs: object,
    source: places.Source,
    filename: str,
) -> list[Problem]:
    """The names of the file (jobs, notifiers, calendars, locks) and the names it refers
    to: notifier subscriptions, locks and `after` (`jobs`: as written)."""
    found = check_names(data.get("jobs"), source, filename)
    for where in ("notifiers", "calendars", "locks"):
        found += check_names(data.get(where), source, filename, where)
    defaults = data.get("defaults")
    found += check_subscriptions(data.get("notifiers"), jobs, defaults, source, filename)
    return found + waits.check(data, jobs, source, filename)


def _calendars(
    config: Config, source: places.Source, filename: str, context: _Context
) -> calendar_build.Built:
    """The jobs' calendars (docs/schedules.md), or ConfigError: the first pass keeps no
    places, so a mistake there makes the file be read again, located."""
    built = calendar_build.build(
        config, source, filename, enforce=context.enforce, today=context.now.date()
    )
    if built.problems:
        raise ConfigError(capped(built.problems, filename))
    return built


def _firing(
    loaded: LoadedConfig, source: places.Source, filename: str, context: _Context
) -> LoadedConfig:
    """`loaded`, unless a job's calendars leave it no fire within 10 years."""
    never = calendar_build.no_fire(loaded, context.now, source, filename)
    if never:
        raise ConfigError(capped(never, filename))
    return loaded


def _unset_problems(
    unset: list[tuple[places.Path, str]],
    source: places.Source,
    filename: str,
    environ: Mapping[str, str],
) -> list[Problem]:
    return [
        Problem.at(filename, source.locate(path), path, notifiers.unset_message(name, environ))
        for path, name in itertools.islice(unset, MAX_PROBLEMS + 1)
    ]


def _duplicate_problems(
    source: places.Source,
    filename: str,
    defaults: dict[str, Any],
    zone: object,
    checks: dict[str, Any],
) -> list[Problem]:
    """The mistakes inside each duplicated job (besides the duplicate itself), located
    in its own lines: fixing the name should not reveal a second round of errors."""
    found: list[Problem] = []
    for where, body in source.duplicates:
        if len(where) != 2 or where[0] != "jobs" or not isinstance(body, dict):
            continue
        data = {"jobs": merge_all(defaults, {where[1]: body}, zone)}
        try:
            Config.model_validate(data, context={**checks, model.CRONS: {}})
        except ValidationError as exc:
            view = source.duplicate_view(where)
            found += problems_from_validation(exc, view, filename, data)
    return found


def _source_problem(problem: places.SourceProblem, filename: str) -> Problem:
    """A problem of the YAML itself; inside an `env`, without the value (a secret)."""
    message = problem.message
    if problem.without_value and is_secret(problem.path):
        message = problem.without_value
    return Problem.at(filename, problem.mark, problem.path, message)


def _loaded(
    config: Config,
    source: places.Source,
    filename: str,
    crons: dict[str, CronExpr],
    context: _Context,
    *,
    env_warnings: list[Problem],
) -> LoadedConfig:
    """Each job with its name, parsed `cron` and expanded `ping`, the notifiers ready to
    send, and the cron lines' places."""
    # Only the places of the cron lines validate may warn of outlive the load: the whole
    # location map of a 10,000-job file is tens of MB the daemon does not need, and the
    # marks of 10,000 UTC jobs 1.2 MB of its idle RSS (docs/performance.md).
    built = _calendars(config, source, filename, context)
    environ = context.environ
    cron_marks: dict[str, places.Mark] = {}
    at_marks: dict[str, places.Mark] = {}
    jobs: dict[str, LoadedJob] = {}
    for name, job in config.jobs.items():
        exprs = [_parsed(text, name, crons) for text in cron_texts(job.cron)]
        ping = None if job.ping is None else expand(job.ping, environ)[0]
        loaded = jobs[name] = LoadedJob(
            name,
            job,
            exprs[0] if exprs else None,
            ping,
            built.rules.get(name),
            built.keys.get(name, ""),
            tuple(exprs[1:]),
        )
        if loaded.warned_at_cron:
            cron_marks[name] = source.locate(("jobs", name, "cron"))
        if job.at is not None:
            at_marks[name] = source.locate(("jobs", name, "at"))
    _share_fields_sets(config)
    specs = {
        name: notifier_spec(name, notifier, environ) for name, notifier in config.notifiers.items()
    }
    whole = LoadedConfig(filename, config, jobs, cron_marks, specs, env_warnings, at_marks)
    return _firing(whole, source, filename, context)


def _parsed(text: str, name: str, crons: dict[str, CronExpr]) -> CronExpr:
    """One `cron` expression of job `name`, parsed (once per text in a load)."""
    expr = crons.get(text) or model.parse_cron(text)
    if expr.resolved:  # `H`: values picked by the job's name (docs/schedules.md)
        expr = model.parse_cron(text, name)
    return expr


def _share_fields_sets(config: Config) -> None:
    """Pydantic keeps, per model instance, the set of fields the input gave (~0.7 kB a
    job); a file's thousands of jobs give a handful of distinct sets, so they share them
    (the models are frozen: nothing adds to a set; model_copy copies it first). For
    10,000 jobs this is 7 MB of the daemon's idle RSS (bench/bench_idle.py, < 80 MB)."""
    shared: dict[frozenset[str], set[str]] = {}
    for job in config.jobs.values():
        given = job.__pydantic_fields_set__
        kept = shared.setdefault(frozenset(given), given)
        object.__setattr__(job, "__pydantic_fields_set__", kept)


def _top_level_shape(data: object) -> str | None:
    if data is None:
        return (
            "the file is empty; it needs a `jobs:` mapping, e.g. "
            "`jobs: {hello: {every: 1m, command: echo hello}}`"
        )
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        return f"the file is {kind}, not a mapping; it needs `jobs:` at the top level"
    jobs = data.get("jobs")
    if "jobs" not in data or jobs is None or jobs == {}:
        return "no jobs: add a `jobs:` mapping with at least one job"
    return None
