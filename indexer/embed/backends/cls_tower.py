"""The export of a class-token ViT: its last block computed for the class token only.

An open_clip ``VisionTransformer`` with token pooling (``pool_type="tok"``, no attentional
pooler) outputs ``proj(ln_post(x[:, 0]))``: of the last residual block, only the class token's
row is ever read. Every step of a block is per token except attention, whose keys and values
need all tokens but whose queries need only the rows that are read. So the last block can run
attention with the class token as the only query, then the output projection, LayerNorm and
MLP on that one row: the same float32 operations on the rows that matter, 1/50 of the last
block's MLP for ViT-B-32 (about 7% of the tower's multiply-adds). Eager torch is untouched; the
export still has to pass the agreement check like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["RECIPE", "cls_only_tower"]

RECIPE = "vit-cls-last-block"  # names this export recipe in the cache key


class ClsOnlyLastBlock(torch.nn.Module):
    """``visual(pixels)`` of a token-pooled open_clip ViT, last block on the class token only."""

    def __init__(self, visual: torch.nn.Module) -> None:
        super().__init__()
        self.visual = visual

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        visual: Any = self.visual
        x = visual._embeds(pixels)
        *blocks, last = visual.transformer.resblocks
        for block in blocks:
            x = block(x)
        normed = last.ln_1(x)
        cls = x[:, :1]
        attended = last.attn(normed[:, :1], normed, normed, need_weights=False)[0]
        cls = cls + last.ls_1(attended)
        cls = cls + last.ls_2(last.mlp(last.ln_2(cls)))
        pooled = visual.ln_post(cls[:, 0])
        if visual.proj is not None:
            pooled = pooled @ visual.proj
        return pooled  # type: ignore[no-any-return]


def cls_only_tower(encode_image: Callable[..., Any]) -> torch.nn.Module | None:
    """The class-token-only export of ``encode_image``, or None when it is not such a ViT.

    Applies to ``model.encode_image`` of an open_clip model whose ``visual`` is a
    ``VisionTransformer`` with token pooling, batch-first blocks, no attentional pooler and no
    token output; anything else (ConvNeXt, timm towers, average pooling) is exported whole.
    """
    try:
        from open_clip.model import CLIP, CustomTextCLIP
        from open_clip.transformer import ResidualAttentionBlock, Transformer, VisionTransformer
    except ImportError:
        return None
    owner = getattr(encode_image, "__self__", None)
    method = getattr(type(owner), "encode_image", None)
    if getattr(encode_image, "__name__", "") != "encode_image" or method not in (
        CLIP.encode_image,
        CustomTextCLIP.encode_image,
    ):
        return None
    visual: Any = getattr(owner, "visual", None)
    if type(visual) is not VisionTransformer:
        return None
    transformer = getattr(visual, "transformer", None)
    checks = (
        getattr(visual, "pool_type", None) == "tok",
        getattr(visual, "attn_pool", None) is None,
        not getattr(visual, "output_tokens", True),
        hasattr(visual, "_embeds") and hasattr(visual, "ln_post") and hasattr(visual, "proj"),
        type(transformer) is Transformer and getattr(transformer, "batch_first", False),
    )
    if not all(checks):
        return None
    blocks = list(transformer.resblocks)  # type: ignore[union-attr]
    if not blocks or not all(type(b) is ResidualAttentionBlock for b in blocks):
        return None
    last = blocks[-1]
    if hasattr(last, "ln_1_kv") or not getattr(last.attn, "batch_first", False):
        return None
    return ClsOnlyLastBlock(visual)
