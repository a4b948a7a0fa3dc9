"""Packaging: the Dockerfile's build run here, command by command, without Docker; the
wheel it builds; `pipx install`; shell completion; the container's entrypoint and
HEALTHCHECK.

There is no Docker engine here, so `image` plays the Dockerfile itself: each RUN line
goes to /bin/sh as Docker would give it, with the image's paths (/src, /wheels,
/etc/crond, /run/crond, /var/lib/crond) moved under a temporary directory, `pip` aimed
at a fresh venv that stands in for the image's Python, and `useradd`/`groupadd` given
`--prefix` so they write a copy of /etc. Any other absolute path in a RUN line fails the
test rather than touch the host. USER is not played (the venv's Python lives under
/root here), so the entrypoint runs as the test's user. Installing from the package
index makes these tests slower than the rest (tens of seconds), hence the timeout.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from crond.daemon import liveness
from tests.e2e.harness import eventually

pytestmark = [
    pytest.mark.timeout(300),  # pip and pipx install from the package index
    # Under `make test`'s workers (--dist loadgroup), this file's tests stay on one worker:
    # the `image` is built once, not once per worker that runs one of its tests.
    pytest.mark.xdist_group("packaging"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the image's `install -o 10001` needs root"),
]

REPO = Path(__file__).resolve().parent.parent
DEV_PYTHON = sys.executable
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
MOVED = ("/src", "/wheels", "/etc/crond", "/run/crond", "/var/lib/crond")
READ_ONLY = ("/usr/sbin/nologin",)  # absolute paths a RUN line may name without moving


# --- reading the Dockerfile ----------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line at the end of the Dockerfile"
    return out


def ignored(rel: str, patterns: list[str]) -> bool:
    """Is `rel` (a path in the context) left out by these .dockerignore patterns? The
    last pattern that matches the path or one of its parents decides."""
    verdict = False
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern.removeprefix("!").strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            verdict = not negate
    return verdict


def dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def copy_context(dest: Path) -> list[str]:
    """Copy what `docker build .` would send; return the files' relative paths."""
    patterns = dockerignore()
    copied: list[str] = []
    for dirpath, dirnames, filenames in os.walk(REPO):
        here = Path(dirpath).relative_to(REPO)
        for name in list(dirnames):
            rel = (here / name).as_posix()
            reincluded = any(p.startswith(f"!{rel}") for p in patterns)
            if ignored(rel, patterns) and not reincluded:
                dirnames.remove(name)
        for name in filenames:
            rel = (here / name).as_posix()
            if not ignored(rel, patterns):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, dest / rel)
                copied.append(rel)
    return sorted(copied)


# --- playing the Dockerfile ----------------------------------------------------------------


@dataclass
class Image:
    tmp: Path
    venv: Path
    context: list[str]
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: Path | None = None
    healthcheck: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.tmp / "root"

    @property
    def crond(self) -> str:
        return str(self.venv / "bin" / "crond")

    def move(self, text: str) -> str:
        """The image's paths, moved under tmp (a word-boundary match only)."""
        pattern = r"(?<![\w./-])(" + "|".join(map(re.escape, MOVED)) + r")(?=[/\s\"']|$)"
        moved = re.sub(pattern, lambda m: str(self.root) + m[1], text)
        for word in re.findall(r"(?<![\w.-])/[\w./*-]+", moved):
            assert word.startswith((str(self.tmp), *READ_ONLY)), (
                f"the Dockerfile names {word}, which this test does not know how to move"
            )
        return moved

    def exec_form(self, words: list[str]) -> list[str]:
        moved = [self.move(w) for w in words]
        return [self.crond if w == "crond" else w for w in moved]

    def environ(self) -> dict[str, str]:
        return {**os.environ, **self.env, "PATH": f"{self.venv}/bin:{os.environ['PATH']}"}


def stand_ins(bin_dir: Path, image: Image, stage: str) -> None:
    """`pip` of the stage's Python, and useradd/groupadd that write the image's /etc."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    pip = f'exec {DEV_PYTHON} -m pip "$@"'
    if stage == "final":  # install into the stand-in for the image's own Python
        pip = f'exec {DEV_PYTHON} -m pip --python {image.venv}/bin/python "$@"'
    scripts = {
        "pip": pip,
        "useradd": f'exec /usr/sbin/useradd --prefix {image.root} "$@"',
        "groupadd": f'exec /usr/sbin/groupadd --prefix {image.root} "$@"',
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)


def run_line(image: Image, line: str, stage: str) -> None:
    mounts = re.findall(r"--mount=(\S+)\s*", line)
    for mount in mounts:
        opts = dict(kv.split("=", 1) for kv in mount.split(","))
        # A bind mount of another stage's directory at the same path: moved the same way.
        assert opts["type"] == "bind", mount
        assert opts["source"] == opts["target"], mount
    command = image.move(re.sub(r"--mount=\S+\s*", "", line))
    bin_dir = image.tmp / f"bin-{stage}"
    stand_ins(bin_dir, image, stage)
    env = image.environ()
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    result = subprocess.run(
        ["/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, f"RUN {command}\n{result.stdout}\n{result.stderr}"


# Once per worker: with scope="module" it was built again (pip and all, ~16 s) whenever the
# worker ran another file's test between two of these, which --dist loadgroup does.
@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    tmp = tmp_path_factory.mktemp("image")
    venv = tmp / "python"  # stands in for the image's Python; pip comes from outside
    subprocess.run([DEV_PYTHON, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    (tmp / "root" / "etc").mkdir(parents=True)
    for name in ("passwd", "group", "shadow", "gshadow", "login.defs"):  # the base image's
        shutil.copy2(Path("/etc") / name, tmp / "root" / "etc" / name)
    context = tmp / "context"
    img = Image(tmp=tmp, venv=venv, context=copy_context(context))
    stage = ""
    for word, rest in instructions(REPO / "Dockerfile"):
        if word == "FROM":
            stage = "build" if rest.endswith(" AS build") else "final"
            img.env = {}
        elif word == "COPY":
            src, dest = shlex.split(rest)
            target = Path(img.move(dest))
            if src == ".":
                shutil.copytree(context, target)
            else:
                assert src in img.context, f"COPY {src}: not in the build context"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(context / src, target)
        elif word == "RUN":
            run_line(img, rest, stage)
        elif word == "ENV":
            for pair in shlex.split(rest):
                key, _, val = pair.partition("=")
                img.env[key] = img.move(val)
        elif word == "USER":
            img.user = rest
        elif word == "WORKDIR":
            img.workdir = Path(img.move(rest))
        elif word == "HEALTHCHECK":
            img.healthcheck = img.exec_form(json.loads(rest.split(" CMD ", 1)[1]))
        elif word == "ENTRYPOINT":
            img.entrypoint = img.exec_form(json.loads(rest))
        elif word == "CMD":
            img.cmd = img.exec_form(json.loads(rest))
        else:
            assert word in ("ARG", "STOPSIGNAL", "LABEL", "EXPOSE"), f"{word}: not played here"
    return img


# --- the image -----------------------------------------------------------------------------


def test_build_context_is_the_package_and_its_metadata_only(image: Image) -> None:
    tops = {rel.split("/")[0] for rel in image.context}
    assert tops <= {"crond", "pyproject.toml", "README.md", "schedules.example.yaml", "LICENSE"}
    assert {"crond", "pyproject.toml", "README.md", "schedules.example.yaml"} <= tops
    assert not [rel for rel in image.context if "__pycache__" in rel]


def test_image_has_an_unprivileged_user_that_owns_its_directories(image: Image) -> None:
    entry = next(
        line.split(":")
        for line in (image.root / "etc" / "passwd").read_text().splitlines()
        if line.startswith("crond:")
    )
    assert entry[2:4] == ["10001", "10001"]
    assert image.user == "10001:10001"
    for name in ("run/crond", "var/lib/crond"):
        st = (image.root / name).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (10001, 10001, 0o750), name
    assert image.workdir is None  # jobs start in /, as under systemd
    assert image.env["STATE_DIRECTORY"] == str(image.root / "var/lib/crond")


def test_container_starts_healthy_as_its_entrypoint_says_and_stops_on_sigterm(
    image: Image,
) -> None:
    assert image.entrypoint[:2] == [image.crond, "run"]
    # The HEALTHCHECK relies on `crond health`'s default path being the entrypoint's
    # liveness file; here that file lives under tmp, so health is told where.
    live = image.entrypoint[image.entrypoint.index("--liveness-file") + 1]
    assert live == image.move(liveness.DEFAULT_PATH)
    assert image.healthcheck == [image.crond, "health"]
    check = [*image.healthcheck, "--liveness-file", live]
    # USER is not played: the directories the image gives its user are the test's user's
    # for this run, as they would be USER's in the container (a root crond refuses a
    # state directory that another user owns).
    owned = [image.root / "run/crond", image.root / "var/lib/crond"]
    for path in owned:
        os.chown(path, os.geteuid(), os.getegid())
    with (image.tmp / "container.log").open("wb") as log:
        proc = subprocess.Popen(
            image.entrypoint + image.cmd,
            cwd=image.workdir or "/",
            env=image.environ(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:

        def healthy() -> bool:
            return subprocess.run(check, capture_output=True, check=False).returncode == 0

        eventually(healthy, 20, "the HEALTHCHECK passes")
        proc.send_signal(signal.SIGTERM)  # `docker stop`
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for path in owned:
            os.chown(path, 10001, 10001)
    events = [
        json.loads(line)
        for line in (image.tmp / "container.log").read_text().splitlines()
        if line.startswith("{")
    ]
    names = [e["event"] for e in events]
    assert names[:2] == ["state.opened", "daemon.started"]  # the store works as that user
    assert names[-1] == "daemon.stopped"
    assert events[1]["config"] == str(image.root / "etc/crond/schedules.yaml")


# --- the wheel, pip, pipx, completion ------------------------------------------------------


def wheel(image: Image) -> Path:
    (found,) = (image.root / "wheels").glob("crond-*.whl")
    return found


def test_wheel_holds_the_package_and_its_entry_point(image: Image) -> None:
    path = wheel(image)
    assert path.name == f"crond-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        dist = f"crond-{VERSION}.dist-info"
        entry_points = zf.read(f"{dist}/entry_points.txt").decode()
        metadata = zf.read(f"{dist}/METADATA").decode()
    assert {"crond/__init__.py", "crond/cli.py", "crond/py.typed"} <= set(names)
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
    assert "crond = crond.cli:main" in entry_points
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    required = {line.split(": ", 1)[1] for line in metadata.splitlines() if "Requires-Dist" in line}
    for dep in declared:
        name = re.split(r"[<>=!~ ]", dep, maxsplit=1)[0]
        assert any(r.lower().startswith(name.lower()) for r in required), dep


@pytest.mark.parametrize("argv", [["crond"], ["python", "-m", "crond"]], ids=["script", "module"])
def test_installed_crond_reports_its_version(image: Image, argv: list[str]) -> None:
    exe = [str(image.venv / "bin" / argv[0]), *argv[1:]]
    result = subprocess.run([*exe, "--version"], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, f"crond, version {VERSION}")


def test_bash_completion_as_the_docs_set_it_up(image: Image) -> None:
    script = (
        'eval "$(_CROND_COMPLETE=bash_source crond)"\n'
        "COMP_WORDS=(crond va); COMP_CWORD=1; _crond_completion crond\n"
        'echo "${COMPREPLY[@]}"\n'
    )
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=image.environ(), check=False
    )
    assert (result.returncode, result.stdout.strip()) == (0, "validate"), result.stderr


@pytest.mark.parametrize(
    ("shell", "marker"),
    [("zsh", "#compdef crond"), ("fish", "complete --no-files --command crond")],
)
def test_zsh_and_fish_completion_scripts(image: Image, shell: str, marker: str) -> None:
    env = {**image.environ(), "_CROND_COMPLETE": f"{shell}_source"}
    result = subprocess.run([image.crond], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0
    assert marker in result.stdout


@pytest.fixture
def pipx(tmp_path: Path) -> list[str]:
    venv = tmp_path / "pipx-venv"
    subprocess.run([DEV_PYTHON, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    subprocess.run(
        [DEV_PYTHON, "-m", "pip", "--python", f"{venv}/bin/python", "install", "-q", "pipx"],
        check=True,
        timeout=240,
        capture_output=True,
    )
    return [str(venv / "bin" / "pipx")]


def test_pipx_install_from_the_source_tree(image: Image, pipx: list[str], tmp_path: Path) -> None:
    # As docs/operations.md has root do it: the venvs under /opt/pipx, the command in
    # /usr/local/bin. Here both live under tmp_path.
    env = {
        **os.environ,
        "PIPX_HOME": str(tmp_path / "opt-pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "usr-local-bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    result = subprocess.run(
        [*pipx, "install", str(image.root / "src")],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    crond = tmp_path / "usr-local-bin" / "crond"
    version = subprocess.run([crond, "--version"], capture_output=True, text=True, check=False)
    assert version.stdout.strip() == f"crond, version {VERSION}"
    assert crond.resolve().is_relative_to(tmp_path / "opt-pipx")
