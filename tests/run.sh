#!/usr/bin/env bash
# The project's test command (the README's second command; .ci/run calls exactly this).
# Installs everything the suite needs on a fresh machine, then runs all of it:
#   bash tests/run.sh            # whole suite
#   bash tests/run.sh -k promtool   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
bash tests/install-tools.sh
# static checks first (configured in pyproject.toml): lint everything, types strictly on exporter/
.venv/bin/ruff check --quiet .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
