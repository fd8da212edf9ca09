"""Build a tiny, deterministic open_clip checkpoint directory that ``load_embedder`` accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

TINY_MODEL_CFG: dict[str, Any] = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 32, "head_width": 16, "patch_size": 32},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1},
}
TINY_PREPROCESS_CFG: dict[str, Any] = {
    "mean": [0.5, 0.5, 0.5],
    "std": [0.25, 0.25, 0.25],
    "interpolation": "bicubic",
    "resize_mode": "shortest",
}
WEIGHTS_NAMES = {"bin": "open_clip_pytorch_model.bin", "safetensors": "open_clip_model.safetensors"}


def build_tiny_checkpoint(
    dest: Path, seed: int = 0, *, weights_format: Literal["bin", "safetensors"] = "bin"
) -> str:
    """Write a seeded tiny ViT open_clip model to ``dest`` (HF hub layout); return its spec string."""
    import open_clip
    import torch

    torch.manual_seed(seed)
    model = open_clip.CLIP(**TINY_MODEL_CFG)
    dest.mkdir(parents=True, exist_ok=True)
    config = {"model_cfg": TINY_MODEL_CFG, "preprocess_cfg": TINY_PREPROCESS_CFG}
    (dest / "open_clip_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    weights = dest / WEIGHTS_NAMES[weights_format]
    if weights_format == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(weights))
    else:
        torch.save(state, weights)
    return str(dest)


# A pretrained tag for the tiny model, published on a (fake) hub the way open_clip's real tags are.
TINY_ARCH = "splitaudit-tiny-test"
TINY_TAG = "fakehub"
TINY_HUB_REPO = "splitaudit/tiny-test"


def register_tiny_pretrained() -> str:
    """Register the tiny architecture and its hub-published tag with open_clip; return its spec."""
    import open_clip
    from open_clip import factory, pretrained

    factory._MODEL_CONFIGS[TINY_ARCH] = json.loads(json.dumps(TINY_MODEL_CFG))
    pretrained._PRETRAINED[TINY_ARCH] = {
        TINY_TAG: pretrained._pcfg(hf_hub=f"{TINY_HUB_REPO}/", **TINY_PREPROCESS_CFG),
    }
    assert TINY_ARCH in open_clip.list_models()
    return f"{TINY_ARCH}:{TINY_TAG}"


def tiny_hub_files(dest: Path, seed: int = 0) -> dict[str, bytes]:
    """The files of the tiny model's hub repository (config + ``.bin`` weights, no safetensors)."""
    build_tiny_checkpoint(dest, seed=seed)
    return {p.name: p.read_bytes() for p in dest.iterdir() if p.is_file()}


if __name__ == "__main__":
    # `python -m helpers.tiny_model ARGS...`: the splitaudit CLI with the tiny tag registered
    # (open_clip's tables live in the process, so a subprocess test registers them here).
    register_tiny_pretrained()
    from splitaudit.indexer.cli.main import main

    main()
