#!/usr/bin/env bash
# Runs every test on a fresh Debian machine, in about 60 minutes on 2 cores shared with other jobs:
#   1. installs what is missing from Debian: Chromium and Mesa's Vulkan driver (apt-get)
#   2. uses the active virtual environment ($VIRTUAL_ENV), else creates .venv in this checkout
#      (--system-site-packages: packages already installed are reused, nothing outside .venv changes)
#      and installs numr-web editable with its [dev] extras there
#   3. builds the web app (scripts/build-web.sh: npm ci, wheels, golden values, vite)
#   4. runs the unit/parity suite (cpu + webgpu over lavapipe) and the browser e2e suite
# Extra arguments go to pytest (e.g. -x, -k NAME); the 25 slowest tests are listed at the end.
# NUMR_TEST_PYTHON=/path/to/python picks the interpreter to install into and test with, as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS=0
echo "== numr_web: every test (about 60 minutes on 2 cores shared with other jobs)"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)   # distributed tests
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ -n "${NUMR_TEST_PYTHON:-}" ]; then
  PY=$NUMR_TEST_PYTHON
  echo "== using $PY (NUMR_TEST_PYTHON): numr-web is installed there, editable"
elif [ -n "${VIRTUAL_ENV:-}" ]; then
  PY=$VIRTUAL_ENV/bin/python
  echo "== using the active virtual environment $VIRTUAL_ENV: numr-web is installed there, editable"
else
  if [ ! -x .venv/bin/python ]; then
    echo "== creating .venv (with the system's site-packages; your Python installation is not changed)"
    python3 -m venv --system-site-packages .venv
  fi
  PY=$PWD/.venv/bin/python
  echo "== using $PWD/.venv"
fi
echo "== pip install -e .[dev]"
"$PY" -m pip install -q --disable-pip-version-check -e ".[dev]"

if [ -x scripts/build-web.sh ] && [ -f package.json ]; then
  echo "== build the web app ($((SECONDS / 60)) min $((SECONDS % 60)) s so far)"
  PYTHON=$PY bash scripts/build-web.sh
fi

echo "== pytest ($((SECONDS / 60)) min $((SECONDS % 60)) s so far)"
targets=(tests)
[ -d e2e ] && ls e2e/test_*.py >/dev/null 2>&1 && targets+=(e2e)
status=0
PYTHONPATH=$PWD/scripts${PYTHONPATH:+:$PYTHONPATH} "$PY" -m pytest -q -rs -p no:cacheprovider \
  -p pytest_quiet_skips --durations=25 "${targets[@]}" "$@" || status=$?
echo "== done in $((SECONDS / 60)) min $((SECONDS % 60)) s (exit status $status)"
exit $status
