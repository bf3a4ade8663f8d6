# gpubot's image: `gpubot serve` as a non-root user on a read-only root filesystem.
#
#   podman build -t gpubot .                       # or: docker build -t gpubot .
#   podman build --build-arg BASE_IMAGE=localhost/gpubot-base:bookworm -t gpubot .
#
# BASE_IMAGE is any Debian bookworm image with python3 (3.11) and the venv module: the
# official python:3.11-slim-bookworm (the default), or a base made with
#   debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm DIR
# (ci/image.sh does that). Both stages use the same base, so the virtualenv's `python`
# points at an interpreter that exists in the final stage.
#
# Behind a proxy that re-signs TLS, give the builder its CA bundle as a build secret (it is
# only mounted while pip runs, never stored in a layer):
#   podman build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt ...
#
# At run time the process writes only to /tmp and to the data volume /var/lib/gpubot (the
# SQLite store, when the store is SQLite). The shipped rules are at /etc/gpubot/rules
# (GPUBOT_RULES_DIR): mount a directory of rule files over it to replace them.

ARG BASE_IMAGE=python:3.11-slim-bookworm

# ---- builder: the wheel, then a virtualenv with gpubot and its dependencies ------------------
FROM ${BASE_IMAGE} AS builder

# The package index; empty means pip's default (PyPI). Only the builder sees it.
ARG PIP_INDEX_URL=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DEFAULT_TIMEOUT=120

# Never run `pip` on the base's interpreter: a venv is the same on the official image
# (python in /usr/local) and on Debian's python3 (no pip outside a venv, PEP 668).
RUN python3 -m venv /opt/gpubot

COPY . /src

# 1. the wheel from pyproject.toml (hatchling decides which packages and data go in);
# 2. gpubot from that wheel, dependencies as binary wheels only (no compiler in any stage);
# 3. pip and setuptools out of the venv: nothing installs at run time;
# 4. the kubernetes client's asyncio copy (kubernetes.aio, 68 MB): gpubot uses the
#    synchronous client only, and nothing imports it.
# The `ca` secret is optional: without it pip uses the base image's CA store.
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \
    set -eu; \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \
    if [ -n "${PIP_INDEX_URL}" ]; then export PIP_INDEX_URL; else unset PIP_INDEX_URL; fi; \
    /opt/gpubot/bin/pip wheel --no-deps --wheel-dir /wheels /src; \
    /opt/gpubot/bin/pip install --only-binary=:all: /wheels/*.whl; \
    /opt/gpubot/bin/pip uninstall --yes pip setuptools; \
    rm -rf /opt/gpubot/lib/python3*/site-packages/kubernetes/aio; \
    /opt/gpubot/bin/gpubot --help > /dev/null

# ---- final: the virtualenv, the rules and an unprivileged user --------------------------------
FROM ${BASE_IMAGE}

# HOME is the data volume (a default kubeconfig lands in ~/.kube); caches go to /tmp; Python
# writes no bytecode (the venv's is compiled at install). The working directory is the data
# volume, so the default store (sqlite:///gpubot.db, relative) is /var/lib/gpubot/gpubot.db.
# GPUBOT_RULES_DIR is set here (an environment variable wins over --config's rules_dir).
ENV PATH=/opt/gpubot/bin:${PATH} \
    HOME=/var/lib/gpubot \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    XDG_CONFIG_HOME=/tmp/.config \
    XDG_STATE_HOME=/tmp/.local/state \
    XDG_DATA_HOME=/var/lib/gpubot/.local/share \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUBOT_RULES_DIR=/etc/gpubot/rules

# Numeric ids (10001), so Kubernetes' runAsNonRoot can check them without /etc/passwd.
RUN groupadd --gid 10001 gpubot \
    && useradd --uid 10001 --gid 10001 --home-dir /var/lib/gpubot --no-create-home \
       --shell /usr/sbin/nologin gpubot \
    && mkdir -p /var/lib/gpubot \
    && chown 10001:10001 /var/lib/gpubot \
    && chmod 0750 /var/lib/gpubot

COPY --from=builder /opt/gpubot /opt/gpubot
COPY rules/ /etc/gpubot/rules/

USER 10001:10001
WORKDIR /var/lib/gpubot
VOLUME ["/var/lib/gpubot"]
EXPOSE 8080

ENTRYPOINT ["gpubot"]
CMD ["serve"]

# Last, so a new revision changes only the image's metadata, not its layers.
ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE_URL=""
LABEL org.opencontainers.image.title="gpubot" \
      org.opencontainers.image.description="Diagnoses GPU node lifecycle incidents in Kubernetes and proposes approved remediation" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
