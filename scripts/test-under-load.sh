#!/usr/bin/env bash
# The test command under CPU load: one busy worker per core runs for as long as the tests do, so a
# test whose outcome depends on machine speed (a sleep standing in for a state change, a bound on wall
# time) shows up here instead of now and then in CI. Optional; not part of scripts/test.sh.
#
#   bash scripts/test-under-load.sh                  # scripts/test.sh once under load
#   RUNS=2 bash scripts/test-under-load.sh tests/e2e # twice in a row, arguments go to pytest
#   LOAD_WORKERS=4 bash scripts/test-under-load.sh   # more load than cores
#   TEST_CMD=".venv/bin/pytest -q -p no:cacheprovider" bash scripts/test-under-load.sh tests/state
#
# The load comes from stress-ng (Debian: apt-get install stress-ng) when it is installed, else from a
# Python busy loop per worker. Exit status: that of the first failing run, 0 when every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
WORKERS="${LOAD_WORKERS:-$(nproc 2>/dev/null || echo 2)}"
RUNS="${RUNS:-1}"
TEST_CMD="${TEST_CMD:-bash scripts/test.sh}"
PY="${PYTHON:-python3}"

load_pids=()
stop_load() {
  for pid in "${load_pids[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${load_pids[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
}
trap stop_load EXIT INT TERM

if command -v stress-ng >/dev/null 2>&1; then
  echo "== load: stress-ng --cpu $WORKERS"
  stress-ng --cpu "$WORKERS" --cpu-method all --quiet &
  load_pids+=("$!")
else
  echo "== load: $WORKERS Python busy loop(s) (install stress-ng for a heavier mix)"
  for _ in $(seq "$WORKERS"); do
    "$PY" -c 'while True: pass' &
    load_pids+=("$!")
  done
fi

status=0
for run in $(seq "$RUNS"); do
  echo "== run $run/$RUNS under load: $TEST_CMD $*"
  $TEST_CMD "$@" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "== run $run/$RUNS failed under load (exit $status)"
    break
  fi
done
exit "$status"
