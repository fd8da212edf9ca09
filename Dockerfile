# splitaudit server image: the API (`api`, the default), the job worker (`worker`), or any
# `splitaudit` command. Multi-stage: the wheel is built once, installed once, no source at run time.
#
#   docker build -t splitaudit .                                  # [embed] with CPU-only torch (default)
#   docker build -t splitaudit:light --build-arg EXTRAS= .        # light core: no torch (hash tiers, gate)
#   docker build -t splitaudit:cuda \
#       --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124 .   # CUDA 12.4 torch
#   docker run --gpus all -e SPLITAUDIT_DEVICE=cuda splitaudit:cuda worker   # jobs embed on the GPU
#   (compose: docker compose -f docker-compose.yml -f docs/docker/gpu.override.yml up; docs/docker.md)
#
# Configuration is SPLITAUDIT_* variables (see app/settings.py and docker-compose.yml);
# SPLITAUDIT_HOME=/data holds the SQLite DB (when no SPLITAUDIT_DATABASE_URL), FAISS stores,
# uploads and the model cache: mount a volume there.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app app
COPY indexer indexer
COPY migrations migrations
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
# The extras installed with the wheel: embed (the embedding stack, default), embed,demo (for
# `splitaudit demo`), or nothing for the light core.
ARG EXTRAS=embed,hf,postgres
# The PyTorch wheel index: CPU-only by default; .../whl/cu124 (or cu121, cu126) for CUDA.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPLITAUDIT_HOME=/data \
    HF_HOME=/data/hf-cache \
    SPLITAUDIT_PORT=8000
# torch first (only with the embedding stack), from the chosen index, so the wheel's torch
# requirement is already met and pip never pulls PyPI's CUDA wheels.
RUN case ",${EXTRAS}," in *,embed,*|*,demo,*) \
        pip install --index-url "${TORCH_INDEX_URL}" "torch<=2.14.1" "torchvision<=0.29.1";; \
    esac
COPY --from=build /wheels /wheels
RUN wheel="$(ls /wheels/splitaudit-*.whl)" && pip install "${wheel}${EXTRAS:+[${EXTRAS}]}" \
    && rm -rf /wheels
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin splitaudit \
    && mkdir -p /data && chown splitaudit:splitaudit /data
USER splitaudit
WORKDIR /home/splitaudit
VOLUME ["/data"]
EXPOSE 8000
# One check for every role: the API answers /api/v1/health; a worker's job loop keeps its
# liveness file fresh; a one-off command is healthy while it runs.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-m", "splitaudit.app.container", "healthcheck"]
ENTRYPOINT ["python", "-m", "splitaudit.app.container"]
CMD ["api"]
