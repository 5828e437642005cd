#!/usr/bin/env bash
# persescheck for the tests: checks PersesDashboard resources against Perses' own Go model
# (github.com/perses/perses v0.54.0, the release the perses-operator builds on), pinned with every
# dependency by tests/tools/persescheck/go.mod and go.sum, built into .tools/persescheck/.
# Rebuilt only when the module or this script changes (stamp file); tests/tools/go.sh finds Go.
# A failed build leaves no binary, only .tools/persescheck/build.log: the Perses tests then skip
# locally, naming it, and fail under CI=true.
#
#   bash tests/tools/persescheck.sh     # idempotent; about a second when nothing changed
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MODULE="$PWD/tests/tools/persescheck"
OUT="$PWD/.tools/persescheck"
mkdir -p "$OUT"
if command -v flock >/dev/null 2>&1; then
  exec 8>"$OUT.lock"
  flock 8
fi
stamp="$(cat "$MODULE/go.mod" "$MODULE/go.sum" "$MODULE/main.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$OUT/.pinned" 2>/dev/null)" = "$stamp" ] && [ -x "$OUT/persescheck" ]; then
  exit 0
fi
rm -f "$OUT/persescheck" "$OUT/.pinned"
required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$MODULE/go.mod")"
if ! GO="$(bash tests/tools/go.sh "$required" 2>"$OUT/build.log")"; then
  echo "persescheck: could not build it (see .tools/persescheck/build.log)" >&2
  exit 0
fi
started=$(date +%s)
if (cd "$MODULE" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
      "$GO" build -trimpath -ldflags "-s -w" -o "$OUT/persescheck" .) >"$OUT/build.log" 2>&1; then
  echo "$stamp" > "$OUT/.pinned"
  echo "persescheck: built in $(( $(date +%s) - started )) s" >&2
else
  rm -f "$OUT/persescheck"
  tail -n 20 "$OUT/build.log" >&2
  echo "persescheck: could not build it (see .tools/persescheck/build.log)" >&2
fi
exit 0
