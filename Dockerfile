# splitaudit server image: the API (`api`, the default), the job worker (`worker`), or any
# `splitaudit` command. Multi-stage: the wheel is built once, installed once, no source at run time.
#
#   docker build -t splitaudit .                                  # CPU-only torch (default, ~1 GB smaller)
#   docker build -t splitaudit:cuda \
#       --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu124 .   # CUDA 12.4 torch
#   docker run --gpus all -e SPLITAUDIT_DEVICE=cuda splitaudit:cuda worker   # jobs embed on the GPU
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
# The PyTorch wheel index: CPU-only by default; .../whl/cu124 (or cu121, cu126) for CUDA.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPLITAUDIT_HOME=/data \
    HF_HOME=/data/hf-cache \
    SPLITAUDIT_PORT=8000
# torch first, from the chosen index, so the wheel's torch requirement is already met.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch<=2.14.1" "torchvision<=0.29.1"
COPY --from=build /wheels /wheels
RUN pip install /wheels/splitaudit-*.whl && rm -rf /wheels
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin splitaudit \
    && mkdir -p /data && chown splitaudit:splitaudit /data
USER splitaudit
WORKDIR /home/splitaudit
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-m", "splitaudit.app.container", "healthcheck"]
ENTRYPOINT ["python", "-m", "splitaudit.app.container"]
CMD ["api"]
