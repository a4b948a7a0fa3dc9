"""The schedules file as frozen pydantic models, and `load(path)`.

`load` is the one way in, for `validate`, `next`, `run` and every reload: it returns a
`Config` or raises one `ConfigError` that holds every located problem at once.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self
from zoneinfo import ZoneInfo

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from crond import yamlsource
from crond.durations import DurationError, format_duration, parse_duration
from crond.problems import (
    ConfigError,
    Problem,
    capped,
    is_secret,
    kind_of,
    problems_from_validation,
    show,
)
from crond.when import timing
from crond.when.zones import ZoneError, get_zone

__all__ = [
    "Catchup",
    "Config",
    "ConfigError",
    "Job",
    "Output",
    "Overlap",
    "Problem",
    "load",
    "loads",
]

JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PYTHON_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_DURATION_SCHEMA = {
    "anyOf": [
        {"type": "integer", "minimum": 0, "description": "seconds"},
        {"type": "string", "pattern": r"^\s*(\d+(ms|s|m|h|d))+\s*$|^\s*\d+\s*$"},
    ]
}


# Files repeat the same few expressions and durations across thousands of jobs, and a
# parse is pure: each distinct text is parsed once per process.
_parse_cron = functools.lru_cache(maxsize=8192)(timing.parse_cron)
# The validation context's key for the expressions parsed during one `loads` (text ->
# CronExpr): the jobs get theirs from there, parsed once, however many distinct ones a
# file has (past the cache's size, a second lookup per job would parse it again).
_CRONS = "crons"
_parse_duration = functools.lru_cache(maxsize=8192)(parse_duration)


def _duration(value: object) -> timedelta:
    # What is not a short text or a whole number is refused here, in crond's words (a
    # list or a long text would be echoed whole).
    if isinstance(value, bool) or not isinstance(value, (str, int)) or len(str(value)) > 100:
        raise PydanticCustomError(
            "crond",
            f"{show(value)} is not a duration (use whole seconds or units like 90s, 5m, 1h30m)",
        )
    try:
        return _parse_duration(value) if isinstance(value, str) else parse_duration(value)
    except DurationError as exc:
        raise PydanticCustomError("crond", str(exc)) from None


# A bound is checked in the same call as the parse: one Python call per value instead of
# two (with an after-validator), over the tens of thousands of durations of a big file.
_ONE_SECOND = timedelta(seconds=1)


def _interval(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError("crond", "an interval must be at least 1s")
    return delta


def _grace(value: object) -> timedelta:
    delta = _duration(value)
    if delta < _ONE_SECOND:
        raise PydanticCustomError(
            "crond", "grace must be at least 1s (a start is always a little late)"
        )
    return delta


Duration = Annotated[timedelta, BeforeValidator(_duration), WithJsonSchema(_DURATION_SCHEMA)]
Interval = Annotated[timedelta, BeforeValidator(_interval), WithJsonSchema(_DURATION_SCHEMA)]
Grace = Annotated[timedelta, BeforeValidator(_grace), WithJsonSchema(_DURATION_SCHEMA)]


def _env_value(value: object) -> str:
    # An env value may be a secret: a message names its kind, never the value (null,
    # true and false say no more than their kind).
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    shown = kind_of(value)
    if value is None or isinstance(value, bool):
        raise PydanticCustomError(
            "crond", f'{shown} is not a string; quote it ("{shown}") to pass it as text'
        )
    raise PydanticCustomError(
        "crond",
        f"{shown} is not a string (env values are text; numbers are turned into text); "
        "the value is not shown, it may be a secret",
    )


EnvValue = Annotated[str, BeforeValidator(_env_value), WithJsonSchema({"type": "string"})]


class Overlap(StrEnum):
    SKIP = "skip"
    ALLOW = "allow"
    REPLACE = "replace"


class Catchup(StrEnum):
    NONE = "none"
    LATEST = "latest"


class Output(StrEnum):
    LOG = "log"
    INHERIT = "inherit"
    DISCARD = "discard"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)


class Retry(_Model):
    """Up to `attempts` more attempts after a failure or timeout, with growing delays."""

    attempts: int = Field(default=0, ge=0, le=100)
    delay: Duration = timedelta(seconds=10)
    backoff: float = Field(default=2.0, ge=1.0, le=100.0)
    max_delay: Duration = timedelta(minutes=10)

    def delay_before(self, attempt: int) -> timedelta:
        """The wait before attempt number `attempt` (2, 3, ...)."""
        seconds = self.delay.total_seconds() * self.backoff ** max(0, attempt - 2)
        return min(timedelta(seconds=seconds), self.max_delay)


def _check_zone(value: str | None) -> str | None:
    if value is not None:
        try:
            get_zone(value)
        except ZoneError as exc:
            raise PydanticCustomError("crond", str(exc)) from None
    return value


class JobFields(_Model):
    """Every job field, all optional: the shape of `defaults`."""

    description: str | None = None
    cron: str | None = None
    every: Interval | None = None
    anchor: AwareDatetime | None = None
    timezone: str | None = None
    jitter: Duration | None = None
    command: Annotated[str, Field(min_length=1)] | list[str] | None = None
    python: str | None = None
    args: list[JsonValue] | None = None
    kwargs: dict[str, JsonValue] | None = None
    interpreter: str | None = None
    workdir: str | None = None
    env: dict[str, EnvValue] | None = None
    user: str | None = None
    timeout: Duration | None = None
    kill_after: Duration | None = None
    overlap: Overlap | None = None
    grace: Grace | None = None
    retry: Retry | None = None
    output: Output | None = None
    enabled: bool | None = None
    catchup: Catchup | None = None
    catchup_window: Grace | None = None
    history: Annotated[int, Field(ge=1, le=100_000)] | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            crons = info.context.get(_CRONS) if info.context else None
            if crons is None or value not in crons:
                try:
                    expr = _parse_cron(value)
                except timing.CronError as exc:
                    raise PydanticCustomError("crond", f'"{value}": {exc}') from None
                if crons is not None:
                    crons[value] = expr
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        return _check_zone(value)

    @field_validator("python")
    @classmethod
    def _python_ref(cls, value: str | None) -> str | None:
        if value is not None and not PYTHON_REF.fullmatch(value):
            raise PydanticCustomError(
                "crond",
                f'"{value}" is not a python reference (write package.module:callable, '
                'e.g. "myapp.tasks:cleanup")',
            )
        return value

    @field_validator("command")
    @classmethod
    def _argv(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not value:
            raise PydanticCustomError("crond", "an empty list has no program to run")
        return value


class Job(JobFields):
    """One job, with the file's defaults already merged in."""

    # Set by `loads`: the name (the job's key in the file) and the parsed `cron`. Slots
    # rather than PrivateAttrs: pydantic gives every instance with private attributes its
    # own dict and a Python-level init call (a third of validating a 10,000-job file).
    __slots__ = ("_cron_expr", "_name")
    if TYPE_CHECKING:
        _cron_expr: timing.CronExpr | None
        _name: str

    timezone: str | None = None
    jitter: Duration = timedelta(0)
    env: dict[str, EnvValue] = Field(default_factory=dict)
    kill_after: Duration = timedelta(seconds=10)
    overlap: Overlap = Overlap.SKIP
    grace: Grace = timedelta(minutes=5)
    retry: Retry = Retry()
    output: Output = Output.LOG
    enabled: bool = True
    catchup: Catchup = Catchup.NONE
    catchup_window: Grace = timedelta(days=1)
    history: Annotated[int, Field(ge=1, le=100_000)] = 100

    @model_validator(mode="after")
    def _shape(self) -> Self:
        # Runs once per job: the usual job is checked with plain comparisons, and the
        # helpers only run to say what is wrong.
        if (self.cron is None) is (self.every is None):
            _exactly_one(self, "cron", "every", "a schedule")
        if (self.command is None) is (self.python is None):
            _exactly_one(self, "command", "python", "something to run")
        if self.every is not None and self.timezone is not None:
            _field_error(
                "timezone",
                "an every job runs in absolute time; remove timezone "
                "(or use cron for a local time of day)",
            )
        if self.anchor is not None and self.every is None:
            _field_error("anchor", "anchor applies to every jobs only")
        if self.python is None and not (
            self.args is None and self.kwargs is None and self.interpreter is None
        ):
            for name in ("args", "kwargs", "interpreter"):
                if getattr(self, name) is not None:
                    _field_error(name, f"{name} applies to python jobs only")
        return self

    @property
    def name(self) -> str:
        try:
            return self._name
        except AttributeError:  # a Job made outside `loads`
            return ""

    def cron_expr(self) -> timing.CronExpr:
        """The parsed `cron` (which must be set)."""
        try:
            expr = self._cron_expr
        except AttributeError:  # a Job made outside `loads`
            expr = None
        return expr if expr is not None else _parse_cron(self.cron)

    @property
    def zone(self) -> ZoneInfo:
        return get_zone(self.timezone or "UTC")

    def make_timing(self) -> timing.Timing:
        """The job's schedule as a Timing (see timing.py)."""
        offset = timing.jitter_offset(self.name, self.jitter)
        if self.cron is not None:
            expr = self.cron_expr()
            if expr.reboot:
                return timing.RebootTiming()
            return timing.CronTiming(expr, self.zone, offset)
        assert self.every is not None  # guaranteed by _shape
        return timing.IntervalTiming(self.every, self.anchor, offset)

    @property
    def reboot(self) -> bool:
        """`cron: "@reboot"`: once per host boot, when the daemon starts."""
        return self.cron is not None and self.cron_expr().reboot

    @property
    def schedule_text(self) -> str:
        if self.reboot:
            return "@reboot"
        if self.cron is not None:
            return f"{self.cron} ({self.timezone or 'UTC'})"
        assert self.every is not None
        return f"every {format_duration(self.every)}"


def _exactly_one(job: Job, first: str, second: str, what: str) -> None:
    has_first, has_second = getattr(job, first) is not None, getattr(job, second) is not None
    if has_first and has_second:
        _field_error(second, f"give either {first} or {second}, not both")
    if not has_first and not has_second:
        _field_error("", f"{what} is missing: give {first} or {second}")


def _field_error(field: str, message: str) -> None:
    raise PydanticCustomError("crond_field", message, {"field": field})


class Daemon(_Model):
    liveness_file: str | None = None
    # Unset: the default place (state.default_dir); "none": no state store at all.
    state_dir: Annotated[str, Field(min_length=1)] | None = None
    heartbeat: Duration = timedelta(seconds=10)
    shutdown_timeout: Duration = timedelta(seconds=30)

    @field_validator("heartbeat")
    @classmethod
    def _heartbeat(cls, value: timedelta) -> timedelta:
        if value < timedelta(milliseconds=100):
            raise PydanticCustomError("crond", "heartbeat must be at least 100ms")
        return value


class Config(_Model):
    """A whole schedules file."""

    version: Literal[1] = 1
    timezone: str = "UTC"
    defaults: JobFields = JobFields()
    daemon: Daemon = Daemon()
    jobs: dict[str, Job]

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        _check_zone(value)
        return value

    @property
    def path(self) -> str:
        return self._path

    _path: str = PrivateAttr(default="")
    _cron_marks: dict[str, yamlsource.Mark] = PrivateAttr(default_factory=dict)


# Fields that only make sense for one kind of job are not merged from `defaults` into
# the other kind, so `defaults: {interpreter: ...}` does not break every command job.
_ONLY_FOR = {
    "timezone": "cron",
    "anchor": "every",
    "args": "python",
    "kwargs": "python",
    "interpreter": "python",
}


def _merge_all(defaults: dict[str, Any], jobs: dict[Any, Any], zone: Any) -> dict[Any, Any]:
    """Each job of `jobs` with `defaults` merged in (the job's own fields win; env
    mappings are merged key by key; a cron job gets the file's zone unless it has one).
    What depends on `defaults` alone is worked out once, not once per job."""
    plain = _ONLY_FOR.keys().isdisjoint(defaults)  # the usual case: one C-level merge
    default_env = defaults.get("env")
    if not isinstance(default_env, dict):
        default_env = None
    merged_jobs = {}
    for name, job in jobs.items():
        if not isinstance(job, dict):
            merged_jobs[name] = job  # let validation report the wrong type
            continue
        if plain:
            merged = {**defaults, **job}
        else:
            merged = {}
            for key, value in defaults.items():
                needed = _ONLY_FOR.get(key)
                if needed is None or needed in job:
                    merged[key] = value
            merged.update(job)
        if default_env is not None:
            env = job.get("env")
            if isinstance(env, dict):
                merged["env"] = {**default_env, **env}
        if "cron" in job and "timezone" not in merged:
            merged["timezone"] = zone
        merged_jobs[name] = merged
    return merged_jobs


def loads(text: str, filename: str = "<string>") -> Config:
    """Parse and validate a schedules file's text; raise ConfigError with every problem."""
    with gc_paused():
        return _validated(yamlsource.parse(text), filename)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while building many objects that will live long (a
    load; the daemon's scheduler entries for it).

    A load allocates ~10 container objects per job and frees few: CPython's collector
    would scan the growing heap again and again (a third of the load time of a
    10,000-job file), and the data holds no cycles worth collecting early. Afterwards,
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


def _validated(source: yamlsource.Source, filename: str) -> Config:
    """The Config of parsed `source`, or ConfigError with every problem, located."""
    problems = [_source_problem(p, filename) for p in source.problems]
    data = source.data
    if not problems:
        shape = _top_level_shape(data)
        if shape:
            raise ConfigError([Problem.at(filename, yamlsource.Mark(1, 1), (), shape)])
    if not isinstance(data, dict):
        raise ConfigError(capped(problems, filename))
    data = dict(data)
    jobs = data.get("jobs")
    if isinstance(jobs, dict):
        defaults = _good_defaults(data.get("defaults"))
        too_big = _defaults_too_big(defaults, len(jobs), source, filename)
        if too_big:
            raise ConfigError(capped([*problems, too_big], filename))
        data["jobs"] = _merge_all(defaults, jobs, _file_zone(data.get("timezone", "UTC")))
    crons: dict[str, timing.CronExpr] = {}
    try:
        config = Config.model_validate(data, context={_CRONS: crons})
    except ValidationError as exc:
        problems += problems_from_validation(exc, source, filename, data)
        config = None
    problems += _check_names(data.get("jobs"), source, filename)
    if problems or config is None:
        raise ConfigError(capped(problems, filename))
    _finish(config, source, filename, crons)
    return config


def _source_problem(problem: yamlsource.SourceProblem, filename: str) -> Problem:
    """A problem of the YAML itself; inside an `env`, without the value (a secret)."""
    message = problem.message
    if problem.without_value and is_secret(problem.path):
        message = problem.without_value
    return Problem.at(filename, problem.mark, problem.path, message)


def _good_defaults(defaults: object) -> dict[str, Any]:
    """The fields of `defaults` that are valid: a bad one is reported once, at
    `defaults.FIELD`, and not merged into every job."""
    if not isinstance(defaults, dict):
        return {}
    try:
        JobFields.model_validate(defaults)
    except ValidationError as exc:
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
    else:
        bad = set()
    # `grace:` with no value sets no default (merged, it would fail in every job)
    return {k: v for k, v in defaults.items() if k not in bad and v is not None}


def _file_zone(zone: object) -> object:
    """The file's zone for its cron jobs; "UTC" when it is not one (reported once, at
    the top-level `timezone`)."""
    if not isinstance(zone, str):
        return "UTC"
    try:
        get_zone(zone)
    except ZoneError:
        return "UTC"
    return zone


# Every job gets the defaults' values and checks them as its own: a default of N values
# (a list's items, a mapping's entries, each counted) in a file of J jobs is N x J values
# to check. Past this many, the file is refused rather than read for minutes.
MAX_DEFAULT_VALUES = 1_000_000


def _defaults_too_big(
    defaults: dict[str, Any], jobs: int, source: yamlsource.Source, filename: str
) -> Problem | None:
    if not defaults or not jobs:
        return None
    limit = MAX_DEFAULT_VALUES // jobs
    sizes = {key: _size(value, limit) for key, value in defaults.items()}
    total = sum(sizes.values())
    if total <= limit:
        return None
    biggest = max(sizes, key=lambda key: sizes[key])
    path = ("defaults", biggest)
    return Problem.at(
        filename,
        source.locate(path, key=True),
        path,
        f"copied into each of the {jobs:,} jobs, the defaults come to more than "
        f"{MAX_DEFAULT_VALUES:,} values to check (at most {limit:,} a job here); set this "
        "field in the jobs that need it instead",
    )


def _size(value: object, limit: int) -> int:
    """How many values `value` is (itself, and all inside it), counted to past `limit`."""
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _finish(
    config: Config, source: yamlsource.Source, filename: str, crons: dict[str, timing.CronExpr]
) -> None:
    """Name the jobs, give them their parsed `cron`, and keep the cron lines' places."""
    config._path = filename
    # Only the cron lines' places outlive the load (for validate's DST warnings): the
    # whole location map of a 10,000-job file is tens of MB the daemon does not need.
    cron_marks: dict[str, yamlsource.Mark] = {}
    # Pydantic keeps, per instance, the set of fields the input gave (~0.7 kB each); a
    # file's thousands of jobs give a handful of distinct sets, so they share them. The
    # models are frozen, so nothing adds to a set (model_copy copies it first). The 7 MB
    # freed by 10,000 jobs is what the next reload's jobs are built in.
    fields_sets: dict[frozenset[str], set[str]] = {}
    for name, job in config.jobs.items():
        object.__setattr__(job, "_name", name)
        cron = job.cron
        if cron is None:
            object.__setattr__(job, "_cron_expr", None)
        else:
            expr = crons.get(cron)
            object.__setattr__(job, "_cron_expr", expr if expr is not None else _parse_cron(cron))
            cron_marks[name] = source.locate(("jobs", name, "cron"))
        given = job.__pydantic_fields_set__
        object.__setattr__(
            job, "__pydantic_fields_set__", fields_sets.setdefault(frozenset(given), given)
        )
    config._cron_marks = cron_marks


def _top_level_shape(data: object) -> str | None:
    if data is None:
        return "the file is empty; it needs a `jobs:` mapping (see schedules.example.yaml)"
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        return f"the file is {kind}, not a mapping; it needs `jobs:` at the top level"
    jobs = data.get("jobs")
    if "jobs" not in data or jobs is None or jobs == {}:
        return "no jobs: add a `jobs:` mapping with at least one job"
    return None


def _check_names(jobs: object, source: yamlsource.Source, filename: str) -> list[Problem]:
    if not isinstance(jobs, dict):
        return []
    return [
        Problem.at(
            filename,
            source.locate(("jobs", name), key=True),
            ("jobs", name),
            f'"{name}" is not a valid job name (letters, digits, "_", "." and "-", starting '
            "with a letter or digit, at most 64 characters)",
        )
        for name in jobs
        if not JOB_NAME.fullmatch(str(name))
    ]


def load(path: str | Path) -> Config:
    """Read and validate the schedules file at `path`."""
    filename = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(filename, 0, 0, "", "no such file")]) from None
    except IsADirectoryError:
        raise ConfigError([Problem(filename, 0, 0, "", "is a directory, not a file")]) from None
    except PermissionError:
        raise ConfigError([Problem(filename, 0, 0, "", "permission denied")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem(filename, 0, 0, "", f"not UTF-8 text (byte {exc.start})")]
        ) from None
    return loads(text, filename)


def dst_warnings(config: Config, now: datetime) -> list[Problem]:
    """Fixed-time jobs whose wall time falls into a DST gap or repeat in the coming year."""
    found = []
    marks, path = config._cron_marks, config.path  # (private attributes are slow to read)
    # Jobs that share an expression and a zone share their sentences: each pair is
    # worked out once.
    sentences: dict[tuple[timing.CronExpr, ZoneInfo], list[str]] = {}
    for name, job in config.jobs.items():
        if job.cron is None or not job.enabled or job.reboot:
            continue
        key = (job.cron_expr(), job.zone)
        said = sentences.get(key)
        if said is None:
            said = sentences[key] = timing.dst_warnings(*key, now)
        for sentence in said:
            mark = marks.get(name, yamlsource.Mark(0, 0))
            found.append(Problem.at(path, mark, ("jobs", name, "cron"), sentence))
    return found


def reboot_warnings(config: Config) -> list[Problem]:
    """`@reboot` with `state_dir: none`: without a store, every daemon start is a boot."""
    state_dir = config.daemon.state_dir
    if state_dir is None or state_dir.strip().lower() != "none":
        return []
    return [
        Problem.at(
            config.path,
            config._cron_marks.get(name, yamlsource.Mark(0, 0)),
            ("jobs", name, "cron"),
            "@reboot without a state store (daemon.state_dir: none) runs at every daemon "
            "start, not once per boot",
        )
        for name, job in config.jobs.items()
        if job.enabled and job.reboot
    ]


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the schedules file, for editors (yaml-language-server)."""
    schema = Config.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "crond schedules file"
    jobs = schema["properties"]["jobs"]
    jobs["propertyNames"] = {"pattern": f"^{JOB_NAME.pattern}$"}
    jobs["minProperties"] = 1
    job = schema["$defs"]["Job"]
    # "Exactly one" is checked by crond; an editor only flags "both", since `defaults`
    # may supply either half.
    job["allOf"] = [
        {"not": {"required": ["cron", "every"]}},
        {"not": {"required": ["command", "python"]}},
    ]
    return schema
