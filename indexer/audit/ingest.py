"""Split ingestion: read, hash and embed every split item once, in batches."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from itertools import islice

import numpy as np
import numpy.typing as npt
from PIL import Image
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from splitaudit.indexer.db.engine import transaction
from splitaudit.indexer.db.models import Split, SplitItem
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import SplitauditError
from splitaudit.indexer.features.hashes import Hash64
from splitaudit.indexer.features.perceptual import oriented_phashes
from splitaudit.indexer.match.inset_candidates import RegionVectors, region_crops, region_decode
from splitaudit.indexer.match.phases import PhaseTimes
from splitaudit.indexer.match.split_state import SplitState
from splitaudit.indexer.match.verify import verify_thumbnail
from splitaudit.indexer.pipeline.extract import Extracted, Extractor
from splitaudit.indexer.pipeline.index import locator_dict
from splitaudit.indexer.sources.member_names import escape_undecodable, escape_undecodable_tree
from splitaudit.indexer.sources.record import Record, Source
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)
BATCH = 64
# Decoded split images kept for the verification step (<= 256 px on the short side, ~300 KB
# each): a split up to ~900 such images is never decoded twice; later rows are re-decoded.
KEPT_IMAGES_BYTES = 256 * 2**20


def ingest_split(
    ws: Workspace,
    split_id: int,
    source: Source,
    *,
    embedders: Mapping[str, Embedder],
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
    phases: PhaseTimes | None = None,
) -> SplitState:
    """Read every item of ``source`` once: store split_item rows (first time) and build arrays."""
    phases = phases or PhaseTimes()
    with ws.sessions() as s:
        split = s.get_one(Split, split_id)
        labels_override: Mapping[str, str] = dict(split.labels or {})
        already = split.ingested
        # Rows a killed earlier run committed are kept and reused (resume), never inserted twice.
        existing: dict[str, int] = {
            key: item_id
            for key, item_id in s.execute(
                select(SplitItem.key, SplitItem.id).where(SplitItem.split_id == split_id)
            ).all()
        }
    ids: list[int] = []
    keys: list[str] = []
    labels: list[str | None] = []
    sha: list[str] = []
    pix: list[str | None] = []
    stream: list[str | None] = []
    ph: list[int] = []
    phm: list[int] = []
    oriented: list[tuple[int, ...]] = []
    sides: list[int] = []
    thumbs: list[npt.NDArray[np.uint8]] = []
    vec_parts: dict[str, list[npt.NDArray[np.float32]]] = {m: [] for m in embedders}
    region_parts: dict[str, list[RegionVectors]] = {m: [] for m in embedders}
    kept: dict[int, Image.Image] = {}
    kept_bytes = 0
    total = 0
    # Split images are kept small in memory for the embedders and the verification thumbnails.
    with Extractor(workers=workers, keep_image=True) as extractor:
        batches = extractor.map_batches(_batches(source, BATCH))
        while True:
            with phases.phase("read+decode+hash"):
                batch = next(batches, None)
            if batch is None:
                break
            with phases.phase("split items (db)"):
                rows = _store_batch(ws, split_id, batch, labels_override, existing, already)
            good = [
                (e, row_id) for e, row_id in zip(batch, rows, strict=True) if e.features is not None
            ]
            for e, row_id in good:
                f = e.features
                assert f is not None
                ids.append(row_id)
                keys.append(e.record.key)
                labels.append(labels_override.get(e.record.key, e.record.label))
                sha.append(f.sha256)
                pix.append(f.pixel_digest)
                stream.append(f.stream_digest)
                ph.append(f.phash)
                phm.append(f.phash_mirror)
                sides.append(min(f.width, f.height))
                assert e.image is not None
                with phases.phase("read+decode+hash"):
                    thumbs.append(verify_thumbnail(e.image))
                    # the stored hashes for the plain and mirrored image, the kept decode's
                    # DCT block for the six other orientations (query side only)
                    oriented.append((f.phash, f.phash_mirror, *oriented_phashes(e.image)[2:]))
                size = e.image.width * e.image.height * len(e.image.getbands())
                if kept_bytes + size <= KEPT_IMAGES_BYTES:
                    kept[len(ids) - 1] = e.image
                    kept_bytes += size
            if good:
                images = [e.image for e, _ in good]
                with phases.phase("embed"):
                    for model_id, embedder in embedders.items():
                        vec_parts[model_id].append(embedder.embed(images))  # type: ignore[arg-type]
                # regions of the large images: a corpus image inset in one is nominated by them
                sizes = [(e.features.width, e.features.height) for e, _ in good]  # type: ignore[union-attr]
                with phases.phase("decode regions"):
                    crops, owners, boxes = region_crops(
                        images,  # type: ignore[arg-type]
                        len(ids) - len(good),
                        sizes,
                        larger=partial(_region_source, [e.record for e, _ in good]),
                    )
                if crops:
                    with phases.phase("embed regions"):
                        for model_id, embedder in embedders.items():
                            vectors = embedder.embed(crops)  # type: ignore[arg-type]
                            region_parts[model_id].append(RegionVectors(owners, vectors, boxes))
            total += len(batch)
            if progress:
                progress(len(batch))
    with transaction(ws.sessions) as s:
        split = s.get_one(Split, split_id)
        split.ingested = True
        split.item_count = total
    return SplitState(
        ids=np.asarray(ids, np.int64),
        keys=keys,
        labels=labels,
        sha256=sha,
        pixel=pix,
        stream=stream,
        phash=np.asarray(ph, np.uint64),
        phash_mirror=np.asarray(phm, np.uint64),
        min_side=np.asarray(sides, np.int32),
        thumbs=np.stack(thumbs) if thumbs else np.zeros((0, 32, 32), np.uint8),
        vectors={
            m: (np.concatenate(parts) if parts else np.zeros((0, embedders[m].dim), np.float32))
            for m, parts in vec_parts.items()
        },
        images=kept,
        regions={
            m: RegionVectors.concat(parts, embedders[m].dim) for m, parts in region_parts.items()
        },
        phash_oriented=(
            np.asarray(oriented, np.uint64).reshape(-1, 8)
            if oriented
            else np.zeros((0, 8), np.uint64)
        ),
    )


def _region_source(records: list[Record], n: int) -> Image.Image | None:
    """The ``n``-th of a batch's test images decoded again for its region embeddings
    (``region_decode``); None (its regions are cut from the ingestion's decode) when the file
    can no longer be read."""
    record = records[n]
    try:
        return region_decode(record.read_bytes())
    except (OSError, SplitauditError) as exc:
        log.info("regions of %s cut from the reduced decode: %s", record.key, exc)
        return None


def _batches(source: Source, n: int) -> Iterator[list[Record]]:
    def records() -> Iterator[Record]:
        for shard in source.shards():
            yield from source.records(shard)

    it = records()
    while batch := list(islice(it, n)):
        yield batch


def _store_batch(
    ws: Workspace,
    split_id: int,
    batch: list[Extracted],
    labels_override: Mapping[str, str],
    existing: dict[str, int],
    already: bool,
) -> list[int]:
    """Insert the batch's new split_item rows (reusing those a killed or concurrent run of the
    same audit committed); returns the batch's ids."""
    keys = [escape_undecodable(e.record.key) for e in batch]
    if already:
        for key in keys:
            if key not in existing:
                raise RuntimeError(f"split item {key!r} appeared after ingestion")
        return [existing[key] for key in keys]
    for _attempt in range(3):
        try:
            with transaction(ws.sessions) as s:
                fresh = [e for e, key in zip(batch, keys, strict=True) if key not in existing]
                rows = [_split_item(split_id, e, labels_override) for e in fresh]
                s.add_all(rows)
                s.flush()
                new_ids = {r.key: r.id for r in rows}
            existing.update(new_ids)
            break
        except IntegrityError:
            # Another run of this audit stored some of these keys first: take its rows.
            with ws.sessions() as s:
                existing.update(
                    s.execute(
                        select(SplitItem.key, SplitItem.id).where(
                            SplitItem.split_id == split_id, SplitItem.key.in_(keys)
                        )
                    ).all()
                )
    return [existing[key] for key in keys]


def _split_item(split_id: int, e: Extracted, labels_override: Mapping[str, str]) -> SplitItem:
    r, f = e.record, e.features
    meta = dict(r.metadata)
    if f is not None and f.text_fields:
        meta["text_fields"] = f.text_fields
    # Non-UTF-8 file or member names arrive as lone surrogates, which no database accepts.
    row = SplitItem(
        split_id=split_id,
        key=_text(r.key),
        uri=_text(r.locator.uri()),
        locator=escape_undecodable_tree(locator_dict(r)),
        label=_text(labels_override.get(r.key, r.label)),
        caption=_text(r.caption),
        meta=escape_undecodable_tree(meta),
        error=_text(e.error),
    )
    if f is not None:
        row.sha256, row.pixel_digest = f.sha256, f.pixel_digest
        row.stream_digest = f.stream_digest
        row.phash = Hash64(f.phash).to_signed()
        row.phash_mirror = Hash64(f.phash_mirror).to_signed()
        row.dhash = Hash64(f.dhash).to_signed()
        row.width, row.height = f.width, f.height
    return row


def _text(value: str | None) -> str | None:
    """A string the database and JSON accept: undecodable name bytes (lone surrogates) escaped."""
    return None if value is None else escape_undecodable(value)
