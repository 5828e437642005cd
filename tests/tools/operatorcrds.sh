#!/usr/bin/env bash
# The Prometheus Operator's CRDs for the tests, generated from its API types as its Makefile's
# generate-crds target does (`cd pkg/apis/monitoring && controller-gen crd:crdVersions=v1
# paths=./v1/. output:crd:dir=...`): controller-gen (sigs.k8s.io/controller-tools) and the types
# module (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring) are pinned by
# tests/tools/operatorcrds/go.mod and go.sum. The Operator's root module (its own build of the
# CRDs) is not served by the Go module proxy; its types module is. Building controller-gen
# resolves the types module without fetching its files: it is downloaded before its directory
# is asked for (an empty module cache has none).
#
# Output: .tools/operatorcrds/crds/monitoring.coreos.com_<plural>.yaml, rebuilt only when the
# pin or this script changes (stamp file). A failure leaves .tools/operatorcrds/build.log: the
# tests that need the CRDs then skip locally and fail under CI=true.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
MODULE="$PWD/tests/tools/operatorcrds"
OUT="$PWD/.tools/operatorcrds"
mkdir -p "$OUT"

stamp="$(cat "$MODULE/go.mod" "$MODULE/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$OUT/.pinned" 2>/dev/null)" = "$stamp" ] && [ -d "$OUT/crds" ]; then
  exit 0
fi
rm -rf "$OUT/crds" "$OUT/.pinned"

required="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$MODULE/go.mod")"
if ! GO="$(bash tests/tools/go.sh "$required" 2>"$OUT/build.log")"; then
  echo "operatorcrds: no Go toolchain (see .tools/operatorcrds/build.log)" >&2
  exit 1
fi
started=$SECONDS
types=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
if (cd "$MODULE" && export GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
      && "$GO" build -trimpath -ldflags="-s -w" -o "$OUT/controller-gen" \
           sigs.k8s.io/controller-tools/cmd/controller-gen \
      && "$GO" mod download "$types" \
      && dir="$("$GO" list -m -f '{{.Dir}}' "$types")" && [ -n "$dir" ] \
      && cd "$dir" && "$OUT/controller-gen" crd:crdVersions=v1 paths=./v1/. \
           output:crd:dir="$OUT/crds.part") >"$OUT/build.log" 2>&1 \
   && [ -s "$OUT/crds.part/monitoring.coreos.com_servicemonitors.yaml" ]; then
  mv "$OUT/crds.part" "$OUT/crds"
  echo "$stamp" > "$OUT/.pinned"
  echo "operatorcrds: generated the Operator's CRDs ($("$GO" -C "$MODULE" list -m -f '{{.Version}}' "$types")) in $((SECONDS - started)) s" >&2
else
  rm -rf "$OUT/crds.part"
  tail -n 20 "$OUT/build.log" >&2
  echo "operatorcrds: could not generate the Operator's CRDs (see .tools/operatorcrds/build.log)" >&2
  exit 1
fi
