#!/usr/bin/env bash
# Runs every test on a fresh Debian machine: installs what is missing (Chromium and Mesa's Vulkan
# driver from Debian, the package with its [dev] extras, the web app's npm packages), builds the web
# app, then runs the unit/parity suite (cpu + webgpu over lavapipe) and the browser e2e suite.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

echo "== pip install -e .[dev]"
python3 -m pip install -q --disable-pip-version-check -e ".[dev]"

if [ -x scripts/build-web.sh ] && [ -f package.json ]; then
  echo "== build the web app"
  bash scripts/build-web.sh
fi

echo "== pytest"
targets=(tests)
[ -d e2e ] && ls e2e/test_*.py >/dev/null 2>&1 && targets+=(e2e)
python3 -m pytest -q -p no:cacheprovider "${targets[@]}" "$@"
