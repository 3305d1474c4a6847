# syntax=docker/dockerfile:1
# gpu-health: one image, both programs (docs/deploy.md).
#
#   docker build -t gpu-health .
#   docker run --rm gpu-health --help                                   # the evaluator
#   docker run --rm --entrypoint gpu-health-exporter gpu-health --help  # the exporter
#
# The evaluator is the default entrypoint, reading /etc/gpu-health/evaluator.yml (a copy of
# deploy/evaluator.docker.yml: mount your own) and storing DuckDB under /var/lib/gpu-health.
# The exporter needs the vendor tools of the host (NVIDIA Container Toolkit injects nvidia-smi).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: the wheel, installed into a virtual environment ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# What the wheel is built from: the sources and the package data they link to (gpu_health/
# links to the programs' folders and, under data/, to rules/, grafana/ and the fake tools).
COPY pyproject.toml README.md ./
COPY gpu_health ./gpu_health
COPY exporter ./exporter
COPY evaluator ./evaluator
COPY rules ./rules
COPY grafana ./grafana
COPY tests/fakebin ./tests/fakebin
COPY tests/fixtures ./tests/fixtures
RUN python -m venv /opt/gpu-health \
 && /opt/gpu-health/bin/pip install --upgrade pip \
 && /opt/gpu-health/bin/pip wheel --no-deps -w /dist . \
 && /opt/gpu-health/bin/pip install /dist/gpu_health-*.whl

# --- runtime: the installed wheel and nothing beside it, a non-root user --------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="gpu-health" \
      org.opencontainers.image.description="GPU health exporter and fault-prediction evaluator" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 gpu-health \
 && useradd --system --uid 10001 --gid gpu-health --home-dir /var/lib/gpu-health \
            --shell /usr/sbin/nologin gpu-health \
 && install -d -o gpu-health -g gpu-health -m 0750 /var/lib/gpu-health
COPY --from=build /opt/gpu-health /opt/gpu-health
# The rule sets, policies and dashboards are in the wheel; this is only the default config.
COPY deploy/evaluator.docker.yml /etc/gpu-health/evaluator.yml
ENV PATH=/opt/gpu-health/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
# Smoke test at build time: both console scripts start.
RUN gpu-health-exporter --help > /dev/null && gpu-health-evaluator --help > /dev/null
USER 10001:10001
WORKDIR /var/lib/gpu-health
VOLUME ["/var/lib/gpu-health"]
EXPOSE 10346 10347
ENTRYPOINT ["gpu-health-evaluator"]
CMD ["run", "--config", "/etc/gpu-health/evaluator.yml"]
