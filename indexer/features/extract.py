"""All features of one image from its bytes: one decode, then hashes that cost next to nothing."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from PIL import Image

from splitaudit.indexer.db.shape_blob import to_bytes
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.embed_input import ResizeCrop
from splitaudit.indexer.features.exact import sha256_bytes
from splitaudit.indexer.features.perceptual import perceptual_hashes
from splitaudit.indexer.features.shape import keeps_shape, shape_descriptors
from splitaudit.indexer.features.types import ImageFeatures


def extract_features(
    data: bytes,
    *,
    keep_image: bool = False,
    hashes_only: bool = False,
    embed_input: ResizeCrop | None = None,
    thumbnail: Callable[[Image.Image], npt.NDArray[np.uint8]] | None = None,
) -> tuple[ImageFeatures, Image.Image | None]:
    """Exact, pixel and perceptual features of image bytes, plus the <=256 px RGB image if asked.

    Raises ``ImageDecodeError`` (with the reason) when the bytes are not a usable image.
    The returned image is what the embedder should consume, so embedding needs no second decode.
    ``hashes_only`` (runs that embed nothing) decodes a JPEG at the smallest scale the hashes
    need; its ``pixel_digest`` may then be ``None`` (see ``splitaudit.indexer.features.decode``).
    With ``embed_input`` (the embedder's eval geometry) the image returned is that geometry's
    crop of the working copy, made from the decode directly (``ResizeCrop.apply``): what the
    embedder would cut out of the <=256 px image, for runs that use it for nothing else.
    With ``thumbnail`` (the verifier's 32x32 grey thumbnail of an image:
    ``match.verify.verify_thumbnail``) an image under ``shape.MAX_SIDE`` px gets its shape
    descriptor.
    """
    if keep_image and hashes_only:
        raise ValueError("keep_image needs the embedding decode, not hashes_only")
    decoded = decode_image(data, hashes_only=hashes_only)
    hashes = perceptual_hashes(decoded.decoded)
    shape = None
    if thumbnail is not None and keeps_shape(decoded.width, decoded.height):
        shape = to_bytes(shape_descriptors(thumbnail(decoded.image)[None])[0])
    features = ImageFeatures(
        sha256=sha256_bytes(data),
        pixel_digest=decoded.pixel_digest,
        phash=hashes.phash,
        dhash=hashes.dhash,
        phash_mirror=hashes.phash_mirror,
        width=decoded.width,
        height=decoded.height,
        format=decoded.format,
        stream_digest=decoded.stream_digest,
        text_fields=decoded.text_fields,
        shape=shape,
    )
    if not keep_image:
        return features, None
    if embed_input is not None:
        return features, embed_input.apply(decoded.decoded)
    return features, decoded.image
