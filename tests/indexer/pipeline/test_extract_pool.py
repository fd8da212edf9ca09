"""The extractor's worker pool: same results, same order as in-process, whatever the batch shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import photo
from sqlalchemy import select

from splitaudit.indexer.db.models import FailedItem, Item
from splitaudit.indexer.pipeline.extract import Extracted, Extractor, split_evenly
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.record import Locator, Record
from splitaudit.indexer.workspace import Workspace


@pytest.mark.parametrize(("n", "parts"), [(0, 2), (1, 2), (5, 2), (64, 2), (7, 3), (3, 8)])
def test_split_evenly_keeps_order_and_balances(n: int, parts: int) -> None:
    runs = split_evenly(list(range(n)), parts)
    assert [x for run in runs for x in run] == list(range(n))
    assert len(runs) == max(1, min(parts, n))
    assert max(map(len, runs)) - min(map(len, runs)) <= 1


def _records(folder: Path, n: int) -> list[Record]:
    folder.mkdir()
    records = []
    for i in range(n):
        path = folder / f"{i}.jpg"
        if i % 5 == 3:
            path.write_bytes(b"\xff\xd8\xff not a jpeg")
        else:
            photo(i, (64 + i, 48)).save(path, quality=90)
        records.append(
            Record(
                key=path.name, source="t", shard="s", locator=Locator(kind="file", path=str(path))
            )
        )
    records.append(
        Record(
            key="gone.jpg",
            source="t",
            shard="s",
            locator=Locator(kind="file", path=str(folder / "x")),
        )
    )
    return records


def _summary(
    batches: list[list[Extracted]],
) -> list[tuple[str, str | None, str | None, tuple[int, int] | None]]:
    return [
        (
            e.record.key,
            e.features.pixel_digest if e.features else None,
            e.error,
            e.image.size if e.image is not None else None,
        )
        for batch in batches
        for e in batch
    ]


@pytest.mark.parametrize("keep_image", [False, True])
def test_pool_gives_the_in_process_results_in_order(tmp_path: Path, keep_image: bool) -> None:
    records = _records(tmp_path / "imgs", 23)
    batches = [records[i : i + 5] for i in range(0, len(records), 5)]
    with Extractor(workers=1, keep_image=keep_image) as serial:
        want = list(serial.map_batches(iter(batches)))
    with Extractor(workers=3, keep_image=keep_image) as pool:
        got = list(pool.map_batches(iter(batches)))
    assert [len(b) for b in got] == [len(b) for b in batches]
    assert _summary(got) == _summary(want)
    errors = [e.error for b in got for e in b if e.error]
    assert len(errors) == 5 and any("cannot read" in str(err) for err in errors)
    assert all((e.image is not None) == keep_image for b in got for e in b if e.features)


def test_index_with_two_workers_stores_what_one_worker_stores(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    for shard, seeds in {"a": range(0, 9), "b": range(9, 14)}.items():
        (root / shard).mkdir(parents=True)
        for s in seeds:
            photo(s, (96, 80)).save(root / shard / f"img{s}.jpg", quality=90)
    (root / "a" / "broken.jpg").write_bytes(b"\xff\xd8\xff garbage")
    stored = []
    for workers in (1, 2):
        ws = Workspace.open(tmp_path / f"home{workers}")
        summary = index_sources(
            ws, "c", [FolderSource(root)], embedder=None, batch_size=4, workers=workers
        )
        assert (summary.indexed, summary.failed) == (14, 1)
        with ws.sessions() as s:
            items = sorted(
                (i.key, i.sha256, i.pixel_digest, i.phash) for i in s.scalars(select(Item))
            )
            failed = sorted(f.key for f in s.scalars(select(FailedItem)))
        stored.append((items, failed))
        ws.close()
    assert stored[0] == stored[1]
