"""A new source format is one module plus one registration line (issue 26).

The toy ``.lst`` format below is the whole "module": a source reading a text file that lists
image paths, with a locator kind of its own (``lst``: the list file + line number, read back by
reading that line). One ``register_source_format`` call makes it indexable, auditable,
storable (locator codec), thumbnailable and countable for progress lines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import photo

import splitaudit
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.pipeline.progress_log import count_folder_images
from splitaudit.indexer.sources.open import open_source, open_split, split_location
from splitaudit.indexer.sources.record import (
    LOCATOR_KINDS,
    Locator,
    LocatorKindSpec,
    Record,
    Shard,
    read_capped,
)
from splitaudit.indexer.sources.registry import (
    SourceFormat,
    register_source_format,
    source_formats,
    unregister_source_format,
)
from splitaudit.indexer.thumbnails import read_original

# ---- the toy format's module -------------------------------------------------------------


class ListSource:
    """A ``.lst`` file: one image path per line (relative to the list's folder)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.uri = str(path.resolve())

    def _lines(self) -> list[str]:
        return [s for s in self.path.read_text(encoding="utf-8").splitlines() if s.strip()]

    def shards(self) -> Iterator[Shard]:
        stat = self.path.stat()
        yield Shard(self.uri, self.path.name, f"{stat.st_size}:{stat.st_mtime_ns}")

    def records(self, shard: Shard) -> Iterator[Record]:
        for n, line in enumerate(self._lines()):
            loc = Locator(kind="lst", path=self.uri, offset=n)
            yield Record(Path(line).name, self.uri, shard.name, loc)


def read_listed(loc: Locator, _timeout: float, max_bytes: int) -> bytes:
    """The image named on line ``offset`` of the list ``path``."""
    assert loc.path is not None and loc.offset is not None
    lst = Path(loc.path)
    line = [s for s in lst.read_text(encoding="utf-8").splitlines() if s.strip()][loc.offset]
    with open(lst.parent / line, "rb") as fh:
        return read_capped(fh, max_bytes)


def count_listed(source: object) -> int:
    assert isinstance(source, ListSource)
    return len(source._lines())


LST = SourceFormat(
    "lst",
    sniff=lambda t: t.is_file and t.suffix == ".lst",
    open_corpus=lambda t, o: ListSource(t.path),
    open_split=lambda t, o: ListSource(t.path),
    locator_kinds=[
        LocatorKindSpec("lst", lambda loc: f"{loc.path}#line={loc.offset}", read_listed)
    ],
    source_type=ListSource,
    count_images=count_listed,
)

# ---- the test ----------------------------------------------------------------------------


@pytest.fixture
def lst_registered() -> Iterator[None]:
    register_source_format(LST)  # the one registration line
    yield
    unregister_source_format("lst")


def _write_list(folder: Path, name: str, seeds: list[int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        photo(seed, (96, 72)).save(folder / f"img{seed}.png")
    lst = folder / name
    lst.write_text("".join(f"img{seed}.png\n" for seed in seeds), encoding="utf-8")
    return lst


def test_a_toy_format_indexes_and_audits_end_to_end(tmp_path: Path, lst_registered: None) -> None:
    corpus_list = _write_list(tmp_path / "corpus", "corpus.lst", [0, 1, 2])
    split_list = _write_list(tmp_path / "split", "split.lst", [1, 7])
    home = tmp_path / "home"

    assert isinstance(open_source(corpus_list), ListSource)
    assert count_folder_images([open_source(corpus_list)]) == 3  # progress total, via the registry
    summary = splitaudit.index(corpus_list, corpus="c", home=home, embed=False, progress=False)
    assert summary.indexed == 3

    assert split_location(split_list) == str(split_list.resolve())
    assert isinstance(open_split(split_list), ListSource)
    result = splitaudit.audit(split_list, corpus="c", home=home, progress=False)
    verdicts = {i["key"]: i["verdict"] for i in result.items}
    assert verdicts["img1.png"] == "exact"
    assert verdicts["img7.png"] != "exact"
    match = next(i for i in result.items if i["key"] == "img1.png")["matches"][0]
    assert match["corpus_key"] == "img1.png"

    # The stored locator round-trips through the codec and reads the original bytes back.
    stored = Locator(kind="lst", path=str(corpus_list.resolve()), offset=1).to_dict()
    assert stored == {"kind": "lst", "path": str(corpus_list.resolve()), "offset": 1}
    assert Locator.from_dict(stored).uri() == f"{corpus_list.resolve()}#line=1"
    original = (tmp_path / "corpus" / "img1.png").read_bytes()
    data = read_original(
        stored, what="img1.png", sha256=hashlib.sha256(original).hexdigest(), pixel_digest=None
    )
    assert data == original


def test_registration_order_and_errors(lst_registered: None) -> None:
    names = [f.name for f in source_formats()]
    assert names[0] == "huggingface" and names[-1] == "lst"
    assert "lst" in LOCATOR_KINDS
    with pytest.raises(UsageError, match="no such format"):
        register_source_format(SourceFormat("x", sniff=lambda t: False), before="nope")
    unregister_source_format("lst")
    assert "lst" not in [f.name for f in source_formats()]


def test_without_registration_the_list_is_not_a_source(tmp_path: Path) -> None:
    lst = _write_list(tmp_path, "a.lst", [0])
    from splitaudit.indexer.errors import InputError

    with pytest.raises(InputError, match="cannot tell what kind of source"):
        open_source(lst)
