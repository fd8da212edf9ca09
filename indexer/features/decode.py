"""Decode image bytes once into the RGB image every feature is computed from.

``decode_image`` is the only place image bytes are decoded. It:

- refuses decompression bombs: more pixels than ``PIL.Image.MAX_IMAGE_PIXELS`` (read at
  call time) is an error, not Pillow's mere warning;
- turns every unreadable input (empty, not an image, truncated, corrupt) into
  ``ImageDecodeError`` with a human reason, so callers record a failed item and go on;
- applies the EXIF orientation;
- decodes JPEG at reduced DCT scale with the fixed request ``draft("RGB", (256, 256))``:
  the largest 1/2, 1/4 or 1/8 reduction keeping both sides >= 256, i.e. at least what a
  224-px embedder needs. The request never depends on configuration, so the same file
  always gives the same pixels;
- keeps the first frame of animated / multi-frame files;
- converts every mode to RGB deterministically: alpha (RGBA, LA, PA, palette or grey with
  a transparency key) is composited on white, 16/32-bit greyscale keeps its top 8 bits,
  CMYK / 1-bit / L / YCbCr go through Pillow's converters.

``pixel_digest`` is the hex SHA-256 of mode, size and raw RGB pixels of that oriented
decode *before* the final resize. For JPEG this is the decode at the fixed 256 request, for
every other format the full-resolution one. Metadata-only edits and lossless re-encodes between
non-JPEG formats (PNG -> lossless WebP, BMP -> PNG, ...) therefore keep the digest, while a
JPEG and its lossless PNG copy get different digests (different decode scales) yet hash
at Hamming ~0, so the near tier catches that pair.

``stream_digest`` (JPEG only, ``splitaudit.indexer.features.jpeg_stream``) digests the coded image data
without metadata segments, without decoding: it is the same whatever scale a run decodes at.

Decode at need: ``decode_image(data, hashes_only=True)`` is for runs that compute hashes
and nothing else. A JPEG is then decoded at the smallest DCT scale pHash / dHash need
(``draft("RGB", (32, 32))``: both sides stay >= 32 px). Where that scale differs from the
256 request's, the pixels differ from an embedding run's, so no pixel digest is computed
(``None``): the stream digest is that image's exact key. Where the scales coincide (JPEGs under
64 px on a side) the pixels and the pixel digest are the same as an embedding run's.

``decoded`` is that RGB decode; perceptual hashes are computed from it (they shrink to
32x32 themselves, so an intermediate resize would only cost time). ``image`` is the
decode with its short side Lanczos-resized to at most 256 px, made on first access: the
embedder consumes it, hash-only runs never pay for it.

Warnings raised by Pillow while decoding (corrupt EXIF and the like) are logged at debug
level rather than left to the process's warning filters, so results do not depend on
them. This uses ``warnings.catch_warnings``: call from processes, not threads.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import warnings
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np
from PIL import Image, UnidentifiedImageError

from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.jpeg_stream import jpeg_stream_digest
from splitaudit.indexer.features.textfields import extract_text_fields

logger = logging.getLogger(__name__)

DRAFT_SIZE = (256, 256)  # fixed JPEG DCT-scale request; see module docstring
HASH_DRAFT_SIZE = (32, 32)  # the smallest scale pHash / dHash need (hash-only runs)
_DCT_SCALES = (8, 4, 2, 1)  # libjpeg's reductions, in the order Pillow's draft tries them
MAX_SHORT_SIDE = 256
FIT_RESAMPLE = Image.Resampling.LANCZOS  # the working copy's fit (embed_input: its crop)
_REDUCING_GAP = 3.0  # box-reduce first for big non-JPEG images; visually equal, much faster
_WHITE = (255, 255, 255)

# Formats we accept. Pillow's others (EPS via Ghostscript, PSD, exotic scientific formats)
# are more attack surface than use for a dataset audit.
SUPPORTED_FORMATS = (
    "JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "PPM", "TGA", "ICO", "AVIF", "JPEG2000",
)  # fmt: skip
_JPEG_FORMATS = frozenset({"JPEG", "MPO"})
_ORIENTATION_TAG = 0x0112
_ORIENTATION_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_WIDE_GREY_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I"})


@dataclass(frozen=True)
class DecodedImage:
    """One decoded image: oriented RGB pixels at decode scale plus what the decode revealed."""

    decoded: Image.Image
    width: int
    height: int
    format: str
    pixel_digest: str | None
    stream_digest: str | None = None
    text_fields: dict[str, str] = field(default_factory=dict)

    @cached_property
    def image(self) -> Image.Image:
        """The RGB working copy, short side at most 256 px (what the embedder consumes)."""
        return fit_short_side(self.decoded, MAX_SHORT_SIDE)


@lru_cache(maxsize=1)
def _open_formats() -> tuple[str, ...]:
    Image.init()
    return tuple(fmt for fmt in SUPPORTED_FORMATS if fmt in Image.OPEN)


def decode_image(
    data: bytes,
    *,
    hashes_only: bool = False,
    pixels_only: bool = False,
    draft: tuple[int, int] = DRAFT_SIZE,
) -> DecodedImage:
    """Decode image bytes once; raise ``ImageDecodeError`` with a reason if they are unusable.

    ``hashes_only`` decodes a JPEG at the smallest scale the perceptual hashes need (see the
    module docstring): ``pixel_digest`` is then ``None`` unless that scale is the 256 request's.
    ``pixels_only`` is for re-decoding an indexed image (the audit's verification): the same
    pixels, without the digests and text fields indexing records (``None`` and empty); with it,
    ``draft`` may ask a JPEG for a larger DCT scale than the fixed 256 request (the audit's
    looks at a large test image's regions and insets).
    """
    if not data:
        raise ImageDecodeError("empty file (0 bytes): not an image")
    if draft != DRAFT_SIZE and not pixels_only:
        raise ValueError(
            "decode_image: another draft size than the fixed request needs pixels_only"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            decoded = _decode(data, hashes_only=hashes_only, pixels_only=pixels_only, draft=draft)
        except ImageDecodeError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ImageDecodeError(
                f"decompression bomb refused: {exc} Raise PIL.Image.MAX_IMAGE_PIXELS only "
                "if you trust this file."
            ) from None
        except UnidentifiedImageError:
            raise ImageDecodeError(
                f"not an image, or a format splitaudit does not read ({len(data)} bytes; "
                f"supported: {', '.join(_open_formats())})"
            ) from None
        except MemoryError:
            raise ImageDecodeError("out of memory while decoding: image too large") from None
        except Exception as exc:  # any plugin failure on bad bytes is a per-image failure
            raise ImageDecodeError(_describe_failure(exc)) from None
    for warning in caught:
        logger.debug("decode warning: %s", warning.message)
    return decoded


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def scrub_reprs(text: str) -> str:
    """``text`` without Python object reprs (``<_io.BytesIO object at 0x...>`` -> ``the image``)."""
    return _OBJECT_REPR.sub("the image", text)


def _describe_failure(exc: Exception) -> str:
    message = scrub_reprs(str(exc)) or type(exc).__name__
    lowered = message.lower()
    if "truncated" in lowered or isinstance(exc, EOFError):
        return f"truncated image: {message}"
    return f"corrupt image: {type(exc).__name__}: {message}"


def draft_scale(width: int, height: int, request: tuple[int, int]) -> int:
    """The DCT reduction Pillow's ``draft`` picks for ``request`` (largest keeping both sides)."""
    fits = min(width // request[0], height // request[1])
    return next(s for s in _DCT_SCALES if fits >= s or s == 1)


def _decode(
    data: bytes,
    *,
    hashes_only: bool,
    pixels_only: bool = False,
    draft: tuple[int, int] = DRAFT_SIZE,
) -> DecodedImage:
    opened = Image.open(io.BytesIO(data), formats=_open_formats())
    width, height = opened.size
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and width * height > limit:
        # Pillow only warns between 1x and 2x its limit; we refuse.
        raise ImageDecodeError(
            f"decompression bomb refused: {width}x{height} = {width * height} pixels exceeds "
            f"the limit of {limit} (PIL.Image.MAX_IMAGE_PIXELS)"
        )
    is_jpeg = opened.format in _JPEG_FORMATS
    digest_pixels = True
    if is_jpeg:
        request = draft
        if hashes_only and draft_scale(width, height, HASH_DRAFT_SIZE) != draft_scale(
            width, height, DRAFT_SIZE
        ):
            request, digest_pixels = HASH_DRAFT_SIZE, False
        if opened.draft("RGB", request) is None:  # no reduction possible: full decode either way
            digest_pixels = True
    opened.load()

    text_fields = {} if pixels_only else extract_text_fields(opened)
    orientation = _orientation(opened)
    rgb = _to_rgb(opened)
    transpose = _ORIENTATION_TRANSPOSE.get(orientation)
    if transpose is not None:
        rgb = rgb.transpose(transpose)
        if transpose in (
            Image.Transpose.TRANSPOSE,
            Image.Transpose.TRANSVERSE,
            Image.Transpose.ROTATE_90,
            Image.Transpose.ROTATE_270,
        ):
            width, height = height, width
    return DecodedImage(
        decoded=rgb,
        width=width,
        height=height,
        format=opened.format or "unknown",
        pixel_digest=pixel_digest(rgb) if digest_pixels and not pixels_only else None,
        stream_digest=jpeg_stream_digest(data, orientation)
        if is_jpeg and not pixels_only
        else None,
        text_fields=text_fields,
    )


def _orientation(image: Image.Image) -> int:
    try:
        value = image.getexif().get(_ORIENTATION_TAG, 1)
    except Exception as exc:  # corrupt EXIF: keep the pixels as stored
        logger.debug("unreadable EXIF orientation ignored: %s", exc)
        return 1
    return value if isinstance(value, int) else 1


def pixel_digest(image: Image.Image) -> str:
    """Hex SHA-256 of an image's mode, size and raw pixel bytes."""
    digest = hashlib.sha256(f"{image.mode} {image.width}x{image.height}\n".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def _to_rgb(image: Image.Image) -> Image.Image:
    """Deterministic conversion of any decoded mode to 8-bit RGB (alpha on white)."""
    mode = image.mode
    if mode == "RGB" and "transparency" not in image.info:
        return image
    if mode in _WIDE_GREY_MODES:
        return _wide_grey_to_l(image).convert("RGB")
    if mode in _ALPHA_MODES or "transparency" in image.info:
        return _composite_on_white(image if mode == "RGBA" else image.convert("RGBA"))
    if mode == "F":
        return image.convert("L").convert("RGB")
    try:
        return image.convert("RGB")
    except ValueError as exc:
        raise ImageDecodeError(f"unsupported pixel mode {mode}: {exc}") from None


def _wide_grey_to_l(image: Image.Image) -> Image.Image:
    """16/32-bit greyscale -> 8-bit by keeping the top byte of the 16-bit range."""
    values = np.asarray(image)
    if image.mode == "I":
        values = np.clip(values, 0, 0xFFFF)
    return Image.fromarray((values.astype(np.uint32) >> 8).astype(np.uint8))


def _composite_on_white(rgba: Image.Image) -> Image.Image:
    background = Image.new("RGB", rgba.size, _WHITE)
    background.paste(rgba.convert("RGB"), mask=rgba.getchannel("A"))
    return background


def fit_size(width: int, height: int, short_side: int = MAX_SHORT_SIDE) -> tuple[int, int]:
    """The working copy's size: short side ``short_side`` (aspect kept); smaller sizes unchanged."""
    current = min(width, height)
    if current <= short_side:
        return width, height
    scale = short_side / current
    return max(1, round(width * scale)), max(1, round(height * scale))


def fit_is_one_pass(width: int, height: int, fit_w: int, fit_h: int) -> bool:
    """Whether the fit from ``width x height`` to ``fit_w x fit_h`` is a plain resample (Pillow
    box-reduces first where the scale reaches twice ``_REDUCING_GAP``)."""
    factor_x = int(width / fit_w / _REDUCING_GAP) or 1
    factor_y = int(height / fit_h / _REDUCING_GAP) or 1
    return factor_x == 1 and factor_y == 1


def fit_short_side(image: Image.Image, short_side: int = MAX_SHORT_SIDE) -> Image.Image:
    """Downscale so the short side is ``short_side`` (keeps aspect); smaller images pass through."""
    size = fit_size(image.width, image.height, short_side)
    if size == image.size:
        return image
    return image.resize(size, FIT_RESAMPLE, reducing_gap=_REDUCING_GAP)
