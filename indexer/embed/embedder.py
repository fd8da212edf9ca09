"""``OpenClipEmbedder``: batches PIL images through a model's preprocess and image tower."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


class BatchPreprocess:
    """Applies a torchvision-style eval transform to a batch, vectorising the tensor steps.

    The geometric steps (resize, crop/pad, convert) run per image exactly as the model's own
    transform defines them; when the transform ends in ``ToTensor`` + ``Normalize`` those two are
    done once on the stacked uint8 batch instead of per image (same numbers, less overhead).
    Batches come out channels-last (the stacked HWC arrays' natural layout), which CPU
    convolutions run faster on; values are identical either way.
    """

    def __init__(self, transform: Callable[[Image.Image], Any]) -> None:
        self.transform = transform
        steps = list(getattr(transform, "transforms", []))
        self._geometry: list[Callable[[Any], Any]] | None = None
        if len(steps) >= 2 and is_to_tensor(steps[-2]) and is_normalize(steps[-1]):
            import torch

            mean = torch.tensor([float(m) for m in steps[-1].mean]).view(1, -1, 1, 1)
            std = torch.tensor([float(s) for s in steps[-1].std]).view(1, -1, 1, 1)
            self._geometry = steps[:-2]
            # (x / 255 - mean) / std as one multiply-add on the uint8 batch
            self._scale = 1.0 / (255.0 * std)
            self._shift = -mean / std

    def __call__(self, images: Sequence[Image.Image]) -> torch.Tensor:
        """Preprocess ``images`` (PIL, any mode) into a float32 ``(n, 3, H, W)`` tensor."""
        import torch

        rgb = [image if image.mode == "RGB" else image.convert("RGB") for image in images]
        if self._geometry is None:
            stacked = torch.stack([self.transform(image) for image in rgb])
            return stacked.contiguous(memory_format=torch.channels_last)
        arrays = []
        for image in rgb:
            out: Any = image
            for step in self._geometry:
                out = step(out)
            if out.mode != "RGB":
                out = out.convert("RGB")
            arrays.append(np.asarray(out))
        batch = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
        normalised = batch.float() * self._scale + self._shift
        return normalised.contiguous(memory_format=torch.channels_last)


def is_to_tensor(step: object) -> bool:
    """Whether a torchvision transform step converts a PIL image to a tensor."""
    return type(step).__name__ in ("ToTensor", "MaybeToTensor")


def is_normalize(step: object) -> bool:
    """Whether a torchvision transform step is ``Normalize`` (with its mean and std)."""
    return type(step).__name__ == "Normalize" and hasattr(step, "mean") and hasattr(step, "std")


class OpenClipEmbedder:
    """An ``Embedder`` over any image encoder: ``(n, 3, H, W)`` float tensor -> ``(n, dim)`` features.

    ``encode_image`` is the model's own image forward (e.g. ``clip.encode_image`` or a timm tower),
    already on ``device`` and in eval mode; ``preprocess`` is the model's eval transform.
    """

    def __init__(
        self,
        encode_image: Callable[[torch.Tensor], torch.Tensor],
        preprocess: Callable[[Image.Image], Any],
        *,
        model_id: str,
        dim: int,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_id = model_id
        self.dim = dim
        self.batch_size = batch_size
        self.device = device
        self.encode_image = encode_image
        self.preprocess = BatchPreprocess(preprocess)

    def __repr__(self) -> str:
        return (
            f"OpenClipEmbedder(model_id={self.model_id!r}, dim={self.dim}, device={self.device!r})"
        )

    def embed(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """Embed RGB images -> float32 ``(len(images), dim)``, each row L2-normalised."""
        out = np.empty((len(images), self.dim), dtype=np.float32)
        for start in range(0, len(images), self.batch_size):
            chunk = images[start : start + self.batch_size]
            out[start : start + len(chunk)] = self.embed_tensor(self.preprocess(chunk))
        return out

    def embed_tensor(self, batch: torch.Tensor) -> npt.NDArray[np.float32]:
        """Run already-preprocessed ``(n, 3, H, W)`` input through the encoder; rows L2-normalised."""
        import torch

        with torch.inference_mode():
            features = self.encode_image(batch.to(self.device))
            if features.ndim != 2 or features.shape[1] != self.dim:
                raise RuntimeError(
                    f"{self.model_id}: image encoder returned shape {tuple(features.shape)}, "
                    f"expected (n, {self.dim})"
                )
            features = torch.nn.functional.normalize(features.float(), dim=-1)
        return features.cpu().numpy().astype(np.float32, copy=False)
