# Foresight service image: `foresight serve` (API + scheduler) on port 8000.
# Build: docker build -t foresight:0.1.0 .
# Pin the base by digest in your registry for reproducible builds, e.g.
#   FROM python:3.11.11-slim-bookworm@sha256:<digest>
# (the exact tag below is the pin used here; no digest was resolvable offline).

# -- build: a virtual environment with the package and its dependencies ----------
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/foresight
WORKDIR /src
# Metadata first: the dependency layer is rebuilt only when pyproject.toml changes.
COPY pyproject.toml README.md ./
COPY forecaster ./forecaster
COPY policy ./policy
COPY api ./api
COPY pipelines ./pipelines
COPY cli ./cli
RUN /opt/foresight/bin/pip install --upgrade pip \
    && /opt/foresight/bin/pip install .

# -- runtime: the environment only, no compilers, no source tree -----------------
FROM python:3.11.11-slim-bookworm AS runtime
ENV PATH=/opt/foresight/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib \
    MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR=false \
    FORESIGHT_ROOT=/var/lib/foresight
RUN groupadd --system --gid 10001 foresight \
    && useradd --system --uid 10001 --gid foresight --home-dir /var/lib/foresight \
       --shell /usr/sbin/nologin foresight \
    && install -d -o foresight -g foresight /var/lib/foresight
COPY --from=build /opt/foresight /opt/foresight
WORKDIR /var/lib/foresight
USER 10001:10001
EXPOSE 8000
# Kubernetes ignores HEALTHCHECK and uses the Deployment's probes (/healthz, /readyz);
# this one serves `docker run`. The slim image has no curl: use Python.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["foresight"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
