# syntax=docker/dockerfile:1
#
# The Bindery controller image. Two stages: the builder turns the source into wheels (ours, the
# session library's from session/, and every dependency's, compiled there if a dependency ships
# no wheel), and the final stage
# installs those wheels, offline, into a virtualenv on a fresh slim base: no compiler, no
# source tree, no pip cache. The code is byte-compiled at build time, so the container runs
# with a read-only root filesystem, as the non-root user 65532.
#
#   docker build -t bindery:dev .
#   docker run --rm bindery:dev --help

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The session library first (the controller depends on it; it is not on an index): small, and
# its wheel lets the dependency layer below resolve it.
COPY session ./session
RUN pip wheel --no-deps --wheel-dir /wheels/session ./session
# Dependencies next: this layer is rebuilt only when a pyproject.toml or the library changes.
COPY pyproject.toml README.md ./
RUN mkdir controller && touch controller/__init__.py \
    && pip wheel --wheel-dir /wheels/deps --find-links /wheels/session '.[mcp]' \
    && rm -r /wheels/deps/bindery-0*.whl /wheels/deps/bindery_session-*.whl controller build \
       ./*.egg-info
COPY controller ./controller
RUN pip wheel --no-deps --wheel-dir /wheels/app . \
    && cp /wheels/session/*.whl /wheels/app/

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="bindery" org.opencontainers.image.version="0.2.0" \
      org.opencontainers.image.description="Kubernetes controller that binds AI agents to typed resources and tools" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/bindery/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    USER=bindery \
    HOME=/tmp
# Install from the builder's wheels through a bind mount: they never become a layer here.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m venv /opt/bindery \
    && /opt/bindery/bin/pip install --no-cache-dir --no-index --disable-pip-version-check \
       --find-links=/wheels/deps --find-links=/wheels/app 'bindery[mcp]' \
    && /opt/bindery/bin/pip uninstall --yes pip \
    && python -m compileall -q -j 0 /opt/bindery/lib \
    && bindery --version
USER 65532:65532
WORKDIR /tmp
# 8080: kopf's liveness endpoint (/healthz); 9090: Prometheus metrics.
EXPOSE 8080 9090
ENTRYPOINT ["bindery", "run"]
