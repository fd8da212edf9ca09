"""One decode per image: bad inputs, bombs, orientation, modes, JPEG draft, pixel digests."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from splitaudit.indexer.errors import ImageDecodeError
from splitaudit.indexer.features.decode import decode_image
from splitaudit.indexer.features.extract import extract_features
from splitaudit.indexer.features.hashes import hamming

T = Image.Transpose
# Orientation tag -> how the stored pixels were turned from the upright image.
STORED_FROM_UPRIGHT = {
    2: T.FLIP_LEFT_RIGHT,
    3: T.ROTATE_180,
    4: T.FLIP_TOP_BOTTOM,
    5: T.TRANSPOSE,
    6: T.ROTATE_90,
    7: T.TRANSVERSE,
    8: T.ROTATE_270,
}


def photo(width: int = 160, height: int = 120, seed: int = 0) -> Image.Image:
    """A deterministic photo-like RGB image (smooth shapes plus mild noise)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    channels = []
    for _ in range(3):
        fx, fy, phase = rng.uniform(1, 5, 3)
        channels.append(128 + 90 * np.sin(fx * x / width * 3 + fy * y / height * 3 + phase))
    pixels = np.stack(channels, axis=-1)
    for _ in range(4):
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(8, height / 3)
        pixels[(x - cx) ** 2 + (y - cy) ** 2 < r**2] = rng.uniform(0, 255, 3)
    pixels += rng.normal(0, 4, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def encode(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    if fmt == "PNG":
        options.setdefault("compress_level", 1)  # lossless either way; level 1 is fast
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width`` x ``height`` (no pixel data needed to be a bomb)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


# --- bad input ------------------------------------------------------------------------


def test_empty_bytes_are_refused() -> None:
    with pytest.raises(ImageDecodeError, match=r"empty file \(0 bytes\)"):
        decode_image(b"")


def test_text_file_is_not_an_image() -> None:
    with pytest.raises(ImageDecodeError, match="not an image") as info:
        decode_image(b"label,path\ncat,cat.jpg\n")
    assert info.value.code == "bad_image"


def test_truncated_jpeg_is_refused() -> None:
    data = encode(photo(400, 300), "JPEG", quality=90)
    with pytest.raises(ImageDecodeError, match=r"^truncated image: "):
        decode_image(data[: len(data) // 2])


def test_jpeg_cut_inside_its_header_is_refused() -> None:
    data = encode(photo(), "JPEG")
    with pytest.raises(ImageDecodeError, match=r"truncated|not an image"):
        decode_image(data[:300])


def test_truncated_png_is_refused() -> None:
    data = encode(photo(300, 200))
    with pytest.raises(ImageDecodeError, match=r"truncated|corrupt"):
        decode_image(data[: len(data) * 2 // 3])


def test_corrupt_png_data_is_refused() -> None:
    data = bytearray(encode(photo(300, 200)))
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # zero a run inside IDAT: bad CRC / zlib stream
    with pytest.raises(ImageDecodeError, match=r"corrupt|truncated"):
        decode_image(bytes(data))


def test_format_outside_the_allow_list_is_refused() -> None:
    with pytest.raises(ImageDecodeError, match="not an image, or a format"):
        decode_image(encode(photo(), "PCX"))


def test_bomb_between_one_and_two_limits_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pillow only warns in this band; the warning must become the error.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    with pytest.raises(ImageDecodeError, match="decompression bomb refused"):
        decode_image(encode(photo(150, 100)))


def test_bomb_over_twice_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    with pytest.raises(ImageDecodeError, match="decompression bomb refused"):
        decode_image(encode(photo(300, 300), "JPEG"))


def test_bomb_header_is_refused_at_the_default_limit() -> None:
    with pytest.raises(ImageDecodeError, match="decompression bomb refused"):
        decode_image(_png_header_only(100_000, 100_000))


def test_image_at_the_limit_decodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 150 * 100)
    assert decode_image(encode(photo(150, 100))).width == 150


# --- orientation ------------------------------------------------------------------------


@pytest.mark.parametrize("orientation", sorted(STORED_FROM_UPRIGHT))
def test_exif_orientation_is_applied(orientation: int) -> None:
    upright = photo(160, 120)
    stored = upright.transpose(STORED_FROM_UPRIGHT[orientation])
    exif = Image.Exif()
    exif[0x0112] = orientation
    rotated = decode_image(encode(stored, "PNG", exif=exif))
    plain = decode_image(encode(upright, "PNG"))
    assert (rotated.width, rotated.height) == (160, 120)
    assert rotated.pixel_digest == plain.pixel_digest
    assert np.array_equal(np.asarray(rotated.decoded), np.asarray(upright))


def test_rotated_jpeg_hashes_like_the_upright_one() -> None:
    upright = photo(640, 480, seed=3)
    exif = Image.Exif()
    exif[0x0112] = 6
    rotated, _ = extract_features(encode(upright.transpose(T.ROTATE_90), "JPEG", exif=exif))
    plain, _ = extract_features(encode(upright, "JPEG"))
    assert (rotated.width, rotated.height) == (640, 480)
    assert hamming(rotated.phash, plain.phash) <= 4
    assert hamming(rotated.dhash, plain.dhash) <= 8


# --- JPEG draft and the working image ---------------------------------------------------


def test_large_jpeg_is_decoded_at_reduced_dct_scale() -> None:
    decoded = decode_image(encode(photo(2048, 1536), "JPEG", quality=85))
    assert (decoded.width, decoded.height) == (2048, 1536)  # original size is reported
    assert decoded.decoded.size == (512, 384)  # 1/4: the largest scale keeping both >= 256
    assert decoded.image.size == (341, 256)
    assert decoded.image.mode == "RGB"
    assert decoded.format == "JPEG"


def test_small_jpeg_is_decoded_at_full_scale() -> None:
    decoded = decode_image(encode(photo(300, 200), "JPEG"))
    assert decoded.decoded.size == (300, 200)
    assert decoded.image.size == (300, 200)


def test_large_png_working_image_has_short_side_256() -> None:
    decoded = decode_image(encode(photo(900, 600)))
    assert decoded.decoded.size == (900, 600)
    assert decoded.image.size == (384, 256)
    assert decoded.image is decoded.image  # resized once, on first use


def test_jpeg_and_its_png_copy_differ_in_digest_but_not_in_hash() -> None:
    jpeg = encode(photo(1600, 1200, seed=5), "JPEG", quality=90)
    with Image.open(io.BytesIO(jpeg)) as im:
        png = encode(im.convert("RGB"))
    from_jpeg, _ = extract_features(jpeg)
    from_png, _ = extract_features(png)
    assert from_jpeg.pixel_digest != from_png.pixel_digest
    assert hamming(from_jpeg.phash, from_png.phash) <= 2
    assert hamming(from_jpeg.phash_mirror, from_png.phash_mirror) <= 2


# --- pixel digest -------------------------------------------------------------------------


def test_metadata_only_jpeg_edit_keeps_the_pixel_digest() -> None:
    data = encode(photo(400, 300), "JPEG", quality=90)
    comment = b"edited by someone"
    com = b"\xff\xfe" + struct.pack(">H", len(comment) + 2) + comment
    edited = data[:2] + com + data[2:]  # a COM segment right after SOI
    original, _ = extract_features(data)
    changed, _ = extract_features(edited)
    assert changed.sha256 != original.sha256
    assert changed.pixel_digest == original.pixel_digest
    assert changed.phash == original.phash


def test_png_to_lossless_webp_keeps_the_pixel_digest() -> None:
    image = photo(200, 150)
    png, _ = extract_features(encode(image))
    webp, _ = extract_features(encode(image, "WEBP", lossless=True))
    bmp, _ = extract_features(encode(image, "BMP"))
    assert webp.format == "WEBP"
    assert png.sha256 != webp.sha256
    assert png.pixel_digest == webp.pixel_digest == bmp.pixel_digest


def test_different_pixels_give_different_digests() -> None:
    image = photo(200, 150)
    changed = image.copy()
    changed.putpixel((10, 10), (0, 0, 0) if image.getpixel((10, 10)) != (0, 0, 0) else (1, 1, 1))
    assert decode_image(encode(image)).pixel_digest != decode_image(encode(changed)).pixel_digest


# --- modes -----------------------------------------------------------------------------


def _rgb_at(decoded_image: Image.Image, xy: tuple[int, int]) -> tuple[int, ...]:
    value = decoded_image.getpixel(xy)
    assert isinstance(value, tuple)
    return value


def test_cmyk_jpeg_becomes_rgb() -> None:
    cmyk = Image.new("CMYK", (64, 64), (0, 255, 255, 0))  # pure red ink
    decoded = decode_image(encode(cmyk, "JPEG", quality=95))
    assert decoded.decoded.mode == "RGB"
    r, g, b = _rgb_at(decoded.decoded, (32, 32))
    assert r > 240 and g < 15 and b < 15


def test_sixteen_bit_grey_keeps_its_top_byte() -> None:
    values = np.array([[0x0000, 0x12FF], [0x8000, 0xFFFF]], dtype=np.uint16)
    decoded = decode_image(encode(Image.fromarray(values)))
    assert decoded.decoded.mode == "RGB"
    assert np.array_equal(np.asarray(decoded.decoded)[..., 0], [[0x00, 0x12], [0x80, 0xFF]])


def test_palette_with_transparency_is_composited_on_white() -> None:
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 0, 255, 0, 0] + [0] * (256 * 3 - 6))
    image.putpixel((1, 1), 1)
    decoded = decode_image(encode(image, "PNG", transparency=0))
    assert _rgb_at(decoded.decoded, (0, 0)) == (255, 255, 255)
    assert _rgb_at(decoded.decoded, (1, 1)) == (255, 0, 0)


def test_rgba_is_composited_on_white() -> None:
    pixels = np.zeros((2, 2, 4), dtype=np.uint8)
    pixels[0, 0] = (0, 0, 255, 255)  # opaque blue
    pixels[0, 1] = (0, 0, 0, 0)  # fully transparent
    pixels[1, 0] = (0, 0, 0, 128)  # half-transparent black
    decoded = decode_image(encode(Image.fromarray(pixels)))
    assert _rgb_at(decoded.decoded, (0, 0)) == (0, 0, 255)
    assert _rgb_at(decoded.decoded, (1, 0)) == (255, 255, 255)
    assert all(abs(c - 127) <= 1 for c in _rgb_at(decoded.decoded, (0, 1)))


def test_grey_with_alpha_is_composited_on_white() -> None:
    la = Image.merge("LA", (Image.new("L", (2, 1), 40), Image.frombytes("L", (2, 1), b"\xff\x00")))
    decoded = decode_image(encode(la))
    assert _rgb_at(decoded.decoded, (0, 0)) == (40, 40, 40)
    assert _rgb_at(decoded.decoded, (1, 0)) == (255, 255, 255)


def test_one_bit_image_becomes_rgb() -> None:
    image = Image.new("1", (8, 8), 0)
    image.putpixel((3, 3), 1)
    decoded = decode_image(encode(image))
    assert _rgb_at(decoded.decoded, (3, 3)) == (255, 255, 255)
    assert _rgb_at(decoded.decoded, (0, 0)) == (0, 0, 0)


def test_animated_gif_uses_the_first_frame() -> None:
    frames = [
        Image.new("RGB", (32, 32), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))
    ]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    decoded = decode_image(buffer.getvalue())
    assert decoded.format == "GIF"
    assert _rgb_at(decoded.decoded, (16, 16)) == (255, 0, 0)


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "TIFF"])
def test_multi_frame_files_use_the_first_frame(fmt: str) -> None:
    first = photo(96, 64)
    options: dict[str, object] = {"lossless": True} if fmt == "WEBP" else {}
    data = encode(
        first, fmt, save_all=True, append_images=[Image.new("RGB", (96, 64), "red")], **options
    )
    decoded = decode_image(data)
    assert decoded.format == fmt
    assert np.array_equal(np.asarray(decoded.decoded), np.asarray(first))


def test_mpo_is_decoded_like_jpeg() -> None:
    image = photo(1200, 800)
    decoded = decode_image(encode(image, "MPO", save_all=True, append_images=[image]))
    assert decoded.format == "MPO"
    assert decoded.decoded.size == (600, 400)  # DCT-scaled like any JPEG
    assert (decoded.width, decoded.height) == (1200, 800)


def test_decoding_is_deterministic() -> None:
    data = encode(photo(1200, 900, seed=9), "JPEG")
    first, second = extract_features(data), extract_features(data)
    assert first == second


def _pixels_only_cases() -> list[bytes]:
    exif = Image.Exif()
    exif[0x0112] = 6
    rgba = photo(300, 200, seed=3).convert("RGBA")
    rgba.putalpha(128)
    return [
        encode(photo(900, 600), "JPEG", quality=85),  # reduced DCT scale, then the 256 resize
        encode(photo(600, 900, seed=1), "JPEG", quality=70, exif=exif),  # EXIF orientation
        encode(photo(40, 30, seed=2), "JPEG"),  # full-scale decode
        encode(rgba, "PNG"),  # alpha on white
        encode(photo(500, 400, seed=4).convert("L"), "PNG"),
    ]


@pytest.mark.parametrize("case", range(5))
def test_pixels_only_decode_gives_the_same_pixels_without_digests(case: int) -> None:
    data = _pixels_only_cases()[case]
    full = decode_image(data)
    pixels = decode_image(data, pixels_only=True)
    assert (pixels.width, pixels.height, pixels.format) == (full.width, full.height, full.format)
    assert np.array_equal(np.asarray(pixels.decoded), np.asarray(full.decoded))
    assert np.array_equal(np.asarray(pixels.image), np.asarray(full.image))
    assert full.pixel_digest is not None
    assert (pixels.pixel_digest, pixels.stream_digest, pixels.text_fields) == (None, None, {})


def test_pixels_only_decode_refuses_bad_bytes_like_a_full_decode() -> None:
    with pytest.raises(ImageDecodeError, match="truncated"):
        decode_image(encode(photo(300, 200), "JPEG")[:400], pixels_only=True)
