#!/bin/sh
# Installs the peers of `make bench-peers` in throwaway places, never in crond's venv:
# yacron and APScheduler 3 each in a venv under bench/.peers (gitignored), and Debian's
# cron package when root. cron is run by the bench itself (`cron -f`), so when the
# package's install starts the system service, this stops it again.
set -eu
DIR=${CROND_BENCH_PEERS_DIR:-bench/.peers}
PY=${PY:-python3}
mkdir -p "$DIR"

if ! [ -x "$DIR/yacron/bin/yacron" ]; then
    echo "installing yacron into $DIR/yacron"
    "$PY" -m venv "$DIR/yacron"
    "$DIR/yacron/bin/pip" install --quiet --disable-pip-version-check yacron
fi
if ! "$DIR/apscheduler/bin/python" -c 'import apscheduler' 2>/dev/null; then
    echo "installing APScheduler 3 into $DIR/apscheduler"
    "$PY" -m venv "$DIR/apscheduler"
    "$DIR/apscheduler/bin/pip" install --quiet --disable-pip-version-check 'apscheduler<4'
fi
# crond as a user installs it (no extras, not editable), from this checkout, every time:
# the memory figures are quoted from it (bench/common.py, CROND_BENCH_CROND).
echo "installing this checkout's crond, as a user would, into $DIR/crond"
[ -x "$DIR/crond/bin/python" ] || "$PY" -m venv "$DIR/crond"
"$DIR/crond/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps .
"$DIR/crond/bin/pip" install --quiet --disable-pip-version-check .

if [ -x /usr/sbin/cron ]; then
    :
elif [ "$(id -u)" != 0 ]; then
    echo "not root: Debian's cron is not installed; its benchmarks will be skipped"
elif ! command -v apt-get >/dev/null; then
    echo "no apt-get: Debian's cron is not installed; its benchmarks will be skipped"
else
    before=$(pgrep -x cron || true)
    echo "installing Debian's cron (apt-get install cron)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cron >/dev/null
    after=$(pgrep -x cron || true)
    if [ -z "$before" ] && [ -n "$after" ]; then
        echo "stopping the cron service the package started (the bench runs its own)"
        if command -v systemctl >/dev/null && systemctl is-active --quiet cron 2>/dev/null; then
            systemctl disable --now cron
        else
            kill $after
        fi
    fi
fi
echo "peers: yacron $("$DIR/yacron/bin/yacron" --version 2>&1 || echo '?')," \
     "APScheduler $("$DIR/apscheduler/bin/python" -c 'import apscheduler; print(apscheduler.__version__)')," \
     "cron $(dpkg-query -W -f '${Version}' cron 2>/dev/null || echo 'not installed')"
