"""Thumbnails from original bytes: file, tar offset, zip member; caching headers; missing sources."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from apptest_support import api_client, assert_error, new_home, seed_audit
from PIL import Image


@pytest.mark.parametrize(
    ("which", "fmt", "source_size"),
    [
        ("file", "JPEG", (96, 64)),
        ("tar", "JPEG", (320, 240)),
        ("zip", "JPEG", (96, 64)),
        ("alpha", "PNG", (96, 64)),
    ],
)
def test_corpus_item_thumbnail_from_each_locator_kind(
    tmp_path: Path, which: str, fmt: str, source_size: tuple[int, int]
) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        response = client.get(f"/api/v1/items/{seeded.items[which]}/thumbnail?size=48")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == f"image/{fmt.lower()}"
    image = Image.open(io.BytesIO(response.content))
    assert image.format == fmt
    assert max(image.size) == 48
    # aspect ratio kept
    assert abs(image.size[0] / image.size[1] - source_size[0] / source_size[1]) < 0.1
    assert response.headers["cache-control"] == "public, max-age=86400"
    assert response.headers["etag"].startswith('"') and "-48" in response.headers["etag"]


def test_default_size_and_small_images_are_not_upscaled(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        big = client.get(f"/api/v1/items/{seeded.items['tar']}/thumbnail")
        small = client.get(f"/api/v1/items/{seeded.items['file']}/thumbnail")
    assert max(Image.open(io.BytesIO(big.content)).size) == 256
    assert Image.open(io.BytesIO(small.content)).size == (96, 64)


def test_etag_revalidation_returns_304(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    url = f"/api/v1/items/{seeded.items['file']}/thumbnail"
    with api_client(home) as client:
        first = client.get(url)
        again = client.get(url, headers={"If-None-Match": first.headers["etag"]})
        other_size = client.get(url + "?size=32", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert other_size.status_code == 200


def test_split_item_thumbnail(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        response = client.get(f"/api/v1/split-items/{seeded.split_items['cat']}/thumbnail?size=32")
    assert response.status_code == 200
    assert max(Image.open(io.BytesIO(response.content)).size) == 32


def test_missing_source_is_404_source_missing_with_hashes(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        error = assert_error(
            client.get(f"/api/v1/items/{seeded.items['gone']}/thumbnail"), 404, "source_missing"
        )
        assert "ab" * 32 in error["message"] and "cd" * 32 in error["message"]
        assert_error(
            client.get(f"/api/v1/split-items/{seeded.split_items['dog']}/thumbnail"),
            404,
            "source_missing",
            contains="split item",
        )
        # URL-only items are never fetched by the server
        assert_error(
            client.get(f"/api/v1/items/{seeded.items['url']}/thumbnail"),
            404,
            "source_missing",
            contains="http://example.com/6.jpg",
        )


def test_changed_source_bytes_are_reported_missing(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    files = tmp_path / "files"
    seeded = seed_audit(home, files)
    (files / "plain.png").write_bytes((files / "test.png").read_bytes())
    with api_client(home) as client:
        assert_error(
            client.get(f"/api/v1/items/{seeded.items['file']}/thumbnail"),
            404,
            "source_missing",
            contains="changed since it was indexed",
        )


def test_unknown_items_and_bad_sizes(tmp_path: Path) -> None:
    with api_client(new_home(tmp_path)) as client:
        assert_error(
            client.get("/api/v1/items/999/thumbnail"), 404, "not_found", contains="corpus item 999"
        )
        assert_error(
            client.get("/api/v1/split-items/999/thumbnail"),
            404,
            "not_found",
            contains="split item 999",
        )
        assert_error(
            client.get("/api/v1/items/1/thumbnail?size=5000"),
            422,
            "invalid_request",
            contains="size",
        )
