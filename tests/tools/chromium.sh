#!/usr/bin/env bash
# Debian's chromium, for the browser tests of the /numa page (tests/integration/test_numa_browser.py)
# and the screenshot in docs/ (python -m benchmarks.numa_page --screenshot). Installed with
# --no-install-recommends from the distribution's archive: never a browser build a test tool
# downloads on its own. Idempotent; a failure is reported, and the browser tests then skip
# locally and fail under CI=true.
set -uo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: no apt-get; install chromium yourself for the browser tests" >&2
  exit 0
fi
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1
  fi
}
export DEBIAN_FRONTEND=noninteractive
as_root apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
  || { as_root apt-get update -q >/dev/null 2>&1 \
       && as_root apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
  || echo "install-tools: could not install Debian's chromium package" >&2
exit 0
