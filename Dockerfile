# syntax=docker/dockerfile:1
# crond in a container: crond is PID 1 (it reaps orphaned processes there), runs as an
# unprivileged user, and `crond health` is the HEALTHCHECK. docs/operations.md explains
# how to run it; tests/test_packaging.py runs every command of this file.
#
#   docker build -t crond .
#   docker run -d --name crond --stop-timeout 45 crond
#   docker run -d --stop-timeout 45 -v "$PWD/schedules.yaml:/etc/crond/schedules.yaml:ro" crond

ARG PYTHON_VERSION=3.11

# Build the wheel from the source (only the files .dockerignore lets in).
FROM python:${PYTHON_VERSION}-slim AS build
COPY . /src
RUN pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels /src

# The image: crond and its dependencies, the example file, an unprivileged user.
FROM python:${PYTHON_VERSION}-slim
# Where crond keeps its state, as under systemd's StateDirectory=.
ENV STATE_DIRECTORY=/var/lib/crond
COPY schedules.example.yaml /etc/crond/schedules.yaml
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore /wheels/*.whl \
    && groupadd --system --gid 10001 crond \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/crond --shell /usr/sbin/nologin crond \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/crond /run/crond \
    && crond --version \
    && crond validate /etc/crond/schedules.yaml
# Numeric, so that Kubernetes can check runAsNonRoot without looking into /etc/passwd.
USER 10001:10001
# `crond health` reads /run/crond/liveness.json by default: the file the entrypoint writes.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 CMD ["crond", "health"]
# crond stops on SIGTERM (Docker's default stop signal) after letting running jobs finish
# for daemon.shutdown_timeout (30s): give `docker stop` more than that (--stop-timeout 45).
ENTRYPOINT ["crond", "run", "--liveness-file", "/run/crond/liveness.json"]
CMD ["/etc/crond/schedules.yaml"]
