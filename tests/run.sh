#!/usr/bin/env bash
# The project's test command (the README's test command; .ci/run calls exactly this).
# Installs everything the suite needs on a fresh machine, then runs all of it:
#   bash tests/run.sh            # whole suite
#   bash tests/run.sh -k promtool   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
# The real kubelet (tests/realkubelet, four releases; rebuilt only when its source changes)
# builds beside the installs below, which wait mostly on the network: it needs only Go. Then,
# in the same job (one heavy Go build at a time), the real control plane (tests/controlplane)
# and the Prometheus Operator's CRDs (tests/tools/operatorcrds.sh).
mkdir -p .tools
( build_started=$SECONDS
  status=0
  bash tests/realkubelet/build.sh || status=1
  bash tests/controlplane/build.sh || status=1
  bash tests/tools/operatorcrds.sh || status=1
  echo "$((SECONDS - build_started))" >.tools/realkubelet-build.seconds
  exit $status ) >.tools/realkubelet-build.out 2>&1 &
realkubelet_build=$!

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash tests/install-tools.sh
installed=$((SECONDS - started))

built=0
wait "$realkubelet_build" || built=$?
cat .tools/realkubelet-build.out >&2
if [ "$built" != 0 ]; then
  case "${CI:-}" in
    1|true|yes) echo "run.sh: a Go test component did not build (CI=true)" >&2; exit 1 ;;
    *) echo "run.sh: a Go test component did not build: its tests skip" >&2 ;;
  esac
fi
echo "run.sh: installed and built in $((SECONDS - started)) s" >&2
# static checks first (configured in pyproject.toml): lint everything, types strictly on exporter/
checks_started=$SECONDS
.venv/bin/ruff check --quiet .
.venv/bin/mypy
# the time per tier at the end of pytest's report starts with these (tests/support/timing.py)
export PODRESOURCES_SETUP_TIMES="installs=$installed \
go-builds=$(cat .tools/realkubelet-build.seconds 2>/dev/null || echo -) \
install-and-build=$((checks_started - started)) ruff-and-mypy=$((SECONDS - checks_started))"
exec .venv/bin/python -m pytest "$@"
