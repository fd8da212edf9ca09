"""All features of one image from its bytes: one decode, then hashes that cost next to nothing."""

from __future__ import annotations

from PIL import Image

from indexer.features.decode import decode_image
from indexer.features.exact import sha256_bytes
from indexer.features.perceptual import perceptual_hashes
from indexer.features.types import ImageFeatures


def extract_features(
    data: bytes, *, keep_image: bool = False
) -> tuple[ImageFeatures, Image.Image | None]:
    """Exact, pixel and perceptual features of image bytes, plus the <=256 px RGB image if asked.

    Raises ``ImageDecodeError`` (with the reason) when the bytes are not a usable image.
    The returned image is what the embedder should consume, so embedding needs no second decode.
    """
    decoded = decode_image(data)
    hashes = perceptual_hashes(decoded.decoded)
    features = ImageFeatures(
        sha256=sha256_bytes(data),
        pixel_digest=decoded.pixel_digest,
        phash=hashes.phash,
        dhash=hashes.dhash,
        phash_mirror=hashes.phash_mirror,
        width=decoded.width,
        height=decoded.height,
        format=decoded.format,
        text_fields=decoded.text_fields,
    )
    return features, decoded.image if keep_image else None
