"""bench.distractors: thumbnails of a pool of unrelated photos for ``bench.recall
--distractors``; the bench's own photos (and repeats within the pool) are left out, so a match
to a distractor is a false positive."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench import distractors


def _photo(seed: int, size: tuple[int, int] = (640, 480)) -> Image.Image:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    return Image.fromarray(small).resize(size, Image.Resampling.BICUBIC)


def test_tiles_come_from_distinct_pool_photos_other_than_the_benchs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    _photo(1).save(pool / "a.jpg", quality=90)
    _photo(2).save(pool / "b.png")
    _photo(2).resize((800, 600)).save(pool / "b-large.jpg", quality=85)  # b again
    _photo(3).save(pool / "bench-photo.jpg", quality=90)  # one of the bench's photos
    _photo(4, (300, 200)).save(pool / "icon.png")  # under MIN_SIDE
    (pool / "broken.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    monkeypatch.setattr(distractors, "POOL_DIRS", (pool, tmp_path / "absent"))
    names = [name for name, _ in distractors.pool_images([_photo(3)])]
    assert names == ["a", "b-large"]  # sorted by path: b.png repeats it
    out = tmp_path / "corpus"
    assert distractors.write_distractors(out, 6, (32, 48, 64), 0, [_photo(3)]) == 6
    written = sorted(out.glob("d-*.png"))
    assert [p.name for p in written][:3] == ["d-00000-32.png", "d-00001-48.png", "d-00002-64.png"]
    assert [Image.open(p).size for p in written[:3]] == [(32, 32), (48, 48), (64, 64)]


def test_an_empty_pool_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distractors, "POOL_DIRS", (tmp_path / "none",))
    with pytest.raises(SystemExit, match="apt-get install gnome-backgrounds"):
        distractors.write_distractors(tmp_path / "corpus", 3, (32,), 0, [])
