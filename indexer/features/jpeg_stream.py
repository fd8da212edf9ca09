"""Stream digest of a JPEG: its coded image data without the metadata segments.

``jpeg_stream_digest`` is the hex SHA-256 of a JPEG's frame header, tables and entropy-coded
scans, skipping the APPn and COM segments that precede them (EXIF, XMP, IPTC, ICC profiles,
JFIF headers and thumbnails, comments), plus the EXIF orientation the decode applies. It needs
no decoding, so it is the same number whatever scale a run decodes at, and

- two files with the same stream digest decode to the same pixels at every scale (same
  tables, same coefficients, same orientation): it never joins images that differ;
- a metadata-only edit (EXIF / XMP / ICC stripped or rewritten, a comment added) keeps it;
- a lossless transcode that rewrites the coded data (``jpegtran -optimize``, baseline <->
  progressive) changes it, like any re-encode: such a copy is found by the pixel digest where
  the run computed one (docs/indexing.md) and by the near tier (pHash Hamming 0) otherwise.

Kept in the digest: every segment from the frame header on (SOF, DHT, DQT, DRI, SOS and the
scan data, markers between scans included) and APP14 ("Adobe", it selects the colour
transform). Trailing bytes after the last scan are kept too: a copy that differs there is not
called identical. A file whose segment structure is broken gets no stream digest (``None``);
its decode decides whether it is usable at all.
"""

from __future__ import annotations

import hashlib

_SOI = b"\xff\xd8"
_SOS = 0xDA
_EOI = 0xD9
_APP14 = 0xEE
_COM = 0xFE
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0-7: no length field
_VERSION = b"splitaudit jpeg-stream v1\n"


def _is_metadata(marker: int) -> bool:
    return (0xE0 <= marker <= 0xEF and marker != _APP14) or marker == _COM


def jpeg_stream_digest(data: bytes, orientation: int = 1) -> str | None:
    """Hex SHA-256 of ``data``'s coded image (metadata segments left out) and its orientation."""
    if not data.startswith(_SOI):
        return None
    view = memoryview(data)
    digest = hashlib.sha256(_VERSION + f"orientation={orientation}\n".encode())
    pos, size = 2, len(data)
    while pos < size:
        if data[pos] != 0xFF:
            return None
        while pos < size and data[pos] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos >= size:
            return None
        marker = data[pos]
        pos += 1
        if marker == _EOI:  # image ended before any scan
            return None
        if marker in _STANDALONE:
            digest.update(bytes((0xFF, marker)))
            continue
        if pos + 2 > size:
            return None
        length = int.from_bytes(data[pos : pos + 2], "big")
        end = pos + length
        if length < 2 or end > size:
            return None
        if marker == _SOS:
            digest.update(bytes((0xFF, marker)))
            digest.update(view[pos:])  # header, scans and everything after
            return digest.hexdigest()
        if not _is_metadata(marker):
            digest.update(bytes((0xFF, marker)))
            digest.update(view[pos:end])
        pos = end
    return None
