#!/usr/bin/env bash
# External tools the tests use, installed into the machine or into .tools/bin:
#   prometheus + promtool  Debian's `prometheus` package (promtool check metrics / rules)
# A tool that cannot be installed is reported here; its tests then skip locally and fail
# under CI=true.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .tools/bin

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1
  fi
}

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get install -y -q prometheus >/dev/null 2>&1 \
      || { as_root apt-get update -q >/dev/null 2>&1 \
           && as_root apt-get install -y -q prometheus >/dev/null 2>&1; } \
      || echo "install-tools: could not install Debian's prometheus package" >&2
  else
    echo "install-tools: no apt-get; install prometheus and promtool yourself" >&2
  fi
fi
exit 0
