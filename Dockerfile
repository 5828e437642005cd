# syntax=docker/dockerfile:1
# podresources-exporter: per-NUMA use of the kubelet's exclusive resources, for Prometheus.
#
#   docker build -t podresources-exporter \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#
# --build-arg EXTRAS=kube adds the official Kubernetes client (requirements-kube.txt), needed
# only for kubeconfigs whose credentials come from an exec plugin or an auth provider; the
# in-cluster service-account token and plain kubeconfigs work without it.
#
# The release workflow (.github/workflows/release.yaml) builds it for linux/amd64 and
# linux/arm64 with an SBOM and provenance, and signs it with cosign.
#
# Base: Python 3.13 on Debian 13 "trixie", slim variant (no compiler, no build headers), pinned
# by tag and by digest. Both stages use the same image so the venv's interpreter link resolves
# identically at build and at run time; the two FROM lines are spelled out (no ARG) so that
# Dependabot (.github/dependabot.yml) bumps them, together, in one pull request. The digest is
# the one public Dependabot-maintained Dockerfiles pinned for python:3.13.15-slim-trixie (the
# machine this was written on reaches no container registry); check it with
#   docker buildx imagetools inspect python:3.13.15-slim-trixie
FROM python:3.13.15-slim-trixie@sha256:7c61056e61ac89e852de05f3dc6fa51a6dd2181797bceed46aa725dd7cb2cd3b AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
ARG EXTRAS=
WORKDIR /src
COPY requirements-build.txt requirements.txt requirements-kube.txt ./
COPY pyproject.toml README.md LICENSE ./
COPY exporter ./exporter
# Everything from hash-locked files (requirements*.txt; CONTRIBUTING.md has the command that
# regenerates them): the build tools into a throw-away venv, the project's dependencies into
# /venv, and the project wheel on top without resolving anything. Wheels only (--only-binary):
# grpcio, protobuf, aiohttp, bcrypt, PyYAML and the Kubernetes client (the "kube" extra,
# requirements-kube.txt) all publish wheels, so nothing is compiled and no compiler is ever
# installed.
RUN python -m venv /build-tools \
    && /build-tools/bin/pip install --require-hashes --only-binary=:all: -r requirements-build.txt \
    && /build-tools/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
    && python -m venv /venv \
    && /venv/bin/pip install --require-hashes --only-binary=:all: -r "requirements${EXTRAS:+-$EXTRAS}.txt" \
    && /venv/bin/pip install --no-deps /wheels/podresources_exporter-*.whl \
    && /venv/bin/pip uninstall --yes pip \
    && /venv/bin/podresources-exporter --version

FROM python:3.13.15-slim-trixie@sha256:7c61056e61ac89e852de05f3dc6fa51a6dd2181797bceed46aa725dd7cb2cd3b
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="podresources-exporter" \
      org.opencontainers.image.description="Prometheus exporter for per-NUMA use of the kubelet's exclusive CPUs, memory, hugepages, devices and DRA devices (podresources API + sysfs)" \
      org.opencontainers.image.url="https://github.com/podresources-exporter/podresources-exporter" \
      org.opencontainers.image.source="https://github.com/podresources-exporter/podresources-exporter" \
      org.opencontainers.image.documentation="https://github.com/podresources-exporter/podresources-exporter#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="podresources-exporter authors" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.13.15-slim-trixie"
# The image's own pip is not needed at run time: one less tool in a container that reads the
# kubelet's socket.
RUN python -m pip uninstall --yes --root-user-action=ignore pip
COPY --from=build /venv /venv
# The source revision, for podresources_build_info{revision} (a source checkout says unknown).
RUN printf '%s\n' "${REVISION}" > "$(/venv/bin/python -c 'import exporter, pathlib; print(pathlib.Path(exporter.__file__).parent)')/REVISION"
COPY LICENSE /licenses/LICENSE
# Bytecode was compiled at install time; the root filesystem is read-only in the chart.
# MALLOC_ARENA_MAX: glibc gives each thread that allocates (the refresh's worker, gRPC's) an
# arena of its own, which keeps freed memory; two are plenty for one Python process.
ENV PATH=/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
# Non-root by default, numeric so Kubernetes' runAsNonRoot can verify it. The Helm chart runs
# the container as uid 0 instead, with every capability dropped: the kubelet creates its
# pod-resources directory (0750) and socket owned by root, and connect(2) on a unix socket
# needs write permission on it. Outside Kubernetes (demo, simulate) this user is enough.
USER 65532:65532
EXPOSE 10075
ENTRYPOINT ["podresources-exporter"]
