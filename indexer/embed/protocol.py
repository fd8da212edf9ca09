"""The ``Embedder`` protocol every embedding model implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
from PIL import Image


class Embedder(Protocol):
    """Turns images into L2-normalised float32 vectors.

    ``model_id`` names the model and its weights unambiguously (it is stored with a corpus,
    and a split must be embedded with the same id); ``dim`` is the vector length.
    """

    model_id: str
    dim: int

    def embed(self, images: Sequence[Image.Image]) -> npt.NDArray[np.float32]:
        """Embed a batch of RGB images -> array of shape ``(len(images), dim)``, rows unit-norm."""
        ...
