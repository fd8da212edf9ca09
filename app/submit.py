"""Turning a request into queued work: a split (uploaded or on the server) plus its audit job.

Everything that can be checked is checked before anything is stored: corpora exist, the
thresholds are valid, the archive unpacks safely, every split file lies under the allowed
roots, the split has images. On any error the upload folder is removed and nothing is stored
(the split and its audit are created in one transaction).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from splitaudit.app.excerpt import excerpt
from splitaudit.app.jsonbody import parse_json
from splitaudit.app.paths import is_under, real_roots
from splitaudit.app.uploads import ReceivedForm
from splitaudit.indexer.db.queries import get_corpus
from splitaudit.indexer.errors import ConflictError, InputError, PathNotAllowedError, UsageError
from splitaudit.indexer.jobs.queue import enqueue
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.workspace import Workspace, check_corpus_name

log = logging.getLogger(__name__)

FORM_FIELDS = (
    "split",
    "corpus",
    "labels",
    "label_names",
    "thresholds",
    "name",
    "allow_empty",
    "image_column",
    "key_column",
)


@dataclass(frozen=True, slots=True)
class AuditRequest:
    """A validated audit request, independent of how it arrived."""

    corpora: list[str]
    name: str
    thresholds: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    # label id -> names / synonyms, for the label-leak tier (e.g. CIFAR "3" -> ["cat"]).
    label_names: dict[str, list[str]] = field(default_factory=dict)
    # Let the audit finish when it checks nothing (a corpus with no indexed image).
    allow_empty: bool = False
    # Hugging Face datasets: which columns hold the image and the row key.
    image_column: str | None = None
    key_column: str | None = None


def parse_corpora(values: Sequence[str]) -> list[str]:
    """Corpus names from repeated fields (each may also be comma separated), deduplicated."""
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if not names:
        raise UsageError("name at least one corpus to audit against (form field 'corpus')")
    return [check_corpus_name(n) for n in dict.fromkeys(names)]


def parse_thresholds(text: str | bytes | None) -> dict[str, Any]:
    """The ``thresholds`` field: a JSON object (missing or blank -> the defaults)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError("thresholds is not UTF-8 text; send a JSON object") from exc
    if text is None or not text.strip():
        return {}
    value = parse_json(text, what="thresholds", example='{"near_hamming": 8}')
    if not isinstance(value, dict):
        raise UsageError("thresholds must be a JSON object mapping tier settings to numbers")
    return value


def validate_request(ws: Workspace, request: AuditRequest) -> None:
    """The corpora exist (raises before an upload is unpacked; thresholds are the audit service's)."""
    with ws.sessions() as s:
        for name in request.corpora:
            get_corpus(s, name=name)


def check_split_files(source: Source, roots: Sequence[str | Path], *, what: str) -> int:
    """Count the split's records, refusing any whose bytes lie outside ``roots`` or at a URL."""
    allowed = real_roots(roots)
    count = 0
    for shard in source.shards():
        for record in source.records(shard):
            count += 1
            loc = record.locator
            if loc.kind == "url":
                raise PathNotAllowedError(
                    f"split item {excerpt(repr(record.key))} points at a URL ({excerpt(loc.url)}); the server only reads "
                    "files under its source roots: download the images and list their paths"
                )
            if loc.path is not None and not is_under(loc.path, allowed):
                raise PathNotAllowedError(
                    f"split item {excerpt(repr(record.key))} points at {excerpt(loc.path)}, outside the allowed "
                    f"folders of this {what}; list only files inside it"
                )
    if count == 0:
        raise InputError(
            f"the {what} holds no images (looked for .jpg/.jpeg/.png/.webp/.gif/.bmp/.tif); "
            "check that it is the right file"
        )
    return count


def normalise_label_names(raw: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{label: "a|b" or ["a", "b"]}`` as ``{label: ["a", "b"]}``."""
    from splitaudit.indexer.labels.names import split_names

    out: dict[str, list[str]] = {}
    for label, names in raw.items():
        values = [names] if isinstance(names, str) else list(names)
        out[str(label)] = [n for value in values for n in split_names(str(value))]
    return out


def queue_audit(
    ws: Workspace, source: Source, request: AuditRequest, *, root: str, params: Mapping[str, Any]
) -> int:
    """Register the split and queue its audit, in one transaction."""
    from splitaudit.indexer.audit.service import submit_audit

    if request.label_names:
        params = {**params, "label_names": request.label_names}
    if request.allow_empty:
        params = {**params, "allow_empty": True}
    return submit_audit(
        ws,
        split_uri=source.uri,
        name=request.name,
        corpora=request.corpora,
        labels=request.labels or None,
        root=root,
        thresholds=request.thresholds,
        params=params,
        local=False,  # a worker runs it
    )


def form_request(form: ReceivedForm) -> AuditRequest:
    """The audit request of a multipart upload (labels and thresholds as fields or files)."""
    unknown = sorted((set(form.fields) | set(form.files)) - set(FORM_FIELDS))
    if unknown:
        raise UsageError(
            f"unknown form field(s) {', '.join(unknown)}; use {', '.join(FORM_FIELDS)}"
        )
    splits = form.files.get("split", [])
    if len(splits) != 1:
        raise UsageError(
            "send exactly one split archive as the file field 'split' "
            "(e.g. curl -F split=@test.zip -F corpus=NAME)"
        )
    corpora = parse_corpora(form.fields.get("corpus", []))
    thresholds_text: str | bytes | None = None
    if form.fields.get("thresholds"):
        thresholds_text = form.fields["thresholds"][-1]
    elif form.files.get("thresholds"):
        thresholds_text = form.files["thresholds"][-1].path.read_bytes()
    labels: dict[str, str] = {}
    if form.files.get("labels") or form.fields.get("labels"):
        from splitaudit.indexer.sources.labels_csv import parse_labels_bytes

        raw = (
            form.files["labels"][-1].path.read_bytes()
            if form.files.get("labels")
            else form.fields["labels"][-1].encode()
        )
        labels = parse_labels_bytes(raw, "labels")
    label_names: dict[str, list[str]] = {}
    if form.fields.get("label_names"):
        raise UsageError(
            "send label_names as a file (JSON, CSV or ImageNet-style text), not a text field"
        )
    if form.files.get("label_names"):
        from splitaudit.indexer.labels.names import load_label_names

        saved = form.files["label_names"][-1]
        try:
            label_names = load_label_names(saved.path)
        except InputError as exc:  # name the upload, not the server's temporary file
            raise InputError(
                str(exc).replace(str(saved.path), f"label_names ({saved.filename})")
            ) from exc
    name = (form.fields.get("name") or [""])[-1].strip() or splits[0].filename or "upload"
    return AuditRequest(
        corpora=corpora,
        name=name[:500],
        thresholds=parse_thresholds(thresholds_text),
        labels=labels,
        label_names=label_names,
        allow_empty=parse_flag(form.fields.get("allow_empty"), "allow_empty"),
        image_column=_text_field(form, "image_column"),
        key_column=_text_field(form, "key_column"),
    )


def _text_field(form: ReceivedForm, name: str) -> str | None:
    """A short optional text field (blank: absent)."""
    value = (form.fields.get(name) or [""])[-1].strip()
    if len(value) > 200:
        raise UsageError(f"{name} is too long ({len(value)} characters; at most 200)")
    return value or None


def open_requested_split(path: Path, request: AuditRequest, *, what: str) -> Source:
    """Open the split at ``path`` with the request's columns; ``key_column`` must take effect."""
    from splitaudit.indexer.sources.open import open_split

    source = open_split(path, image_column=request.image_column, key_column=request.key_column)
    if request.key_column is not None and f"#key_column={request.key_column}" not in source.uri:
        raise UsageError(
            f"key_column applies to Hugging Face datasets (Parquet, save_to_disk); this {what} "
            "is not one (manifests take a 'key' column)"
        )
    return source


def parse_flag(values: Sequence[str] | None, name: str) -> bool:
    """A boolean form field: ``true/1/yes/on`` or ``false/0/no/off`` (absent: false)."""
    if not values:
        return False
    text = values[-1].strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise UsageError(f"{name} must be true or false, got {excerpt(values[-1])}")


# An upload may unpack to MAX_UNPACK_RATIO times its own size (zip/tar of images barely
# compress; far more is a zip bomb), but always to at least UNPACK_FLOOR bytes.
MAX_UNPACK_RATIO = 100.0
UNPACK_FLOOR = 64 * 1024 * 1024


def unpack_limit(upload_size: int, *, max_unpacked: int, max_ratio: float) -> int:
    """The most bytes an upload of ``upload_size`` bytes may unpack to."""
    return min(max_unpacked, max(UNPACK_FLOOR, int(upload_size * max_ratio)))


def audit_from_upload(
    ws: Workspace,
    form: ReceivedForm,
    workdir: Path,
    *,
    max_unpacked: int,
    max_ratio: float = MAX_UNPACK_RATIO,
) -> int:
    """Unpack an uploaded split into ``workdir`` and queue its audit; returns the audit id.

    The unpacked size is capped (``unpack_limit``); once the audit is done its worker deletes
    every unpacked file review does not show (``splitaudit.indexer.audit.prune``).
    """
    from splitaudit.indexer.sources.archive import archive_kind, extract_archive

    request = form_request(form)
    validate_request(ws, request)
    upload = form.files["split"][0]
    if upload.size == 0:
        raise InputError("the uploaded split is empty (0 bytes); attach the archive file")
    if archive_kind(upload.path) is None:
        raise InputError(
            f"the uploaded split {upload.filename!r} is not a zip or tar archive; "
            "pack the split folder with zip or tar and upload that"
        )
    limit = unpack_limit(upload.size, max_unpacked=max_unpacked, max_ratio=max_ratio)
    try:
        root = extract_archive(upload.path, workdir / "split", max_bytes=limit)
    except InputError as exc:
        # Name the upload, not the server's temporary file.
        text = str(exc).replace(str(upload.path), f"the uploaded split {upload.filename!r}")
        if "unpacks to" in text:
            text += (
                f" (this upload may unpack to {limit / 2**20:g} MiB: {max_ratio:g} times its "
                "size, at least 64 MiB, at most SPLITAUDIT_MAX_UNPACKED_MB)"
            )
        raise type(exc)(text) from None
    for saved in (f for files in form.files.values() for f in files):
        saved.path.unlink(missing_ok=True)  # the unpacked tree is what the audit reads
    source = open_requested_split(root, request, what="archive")
    check_split_files(source, [workdir / "split"], what="archive")
    return queue_audit(
        ws,
        source,
        request,
        root=str(root),
        params={
            "upload": upload.filename,
            "origin": "upload",
            "allowed_roots": real_roots([workdir / "split"]),
        },
    )


def audit_from_paths(
    ws: Workspace, *, path: Path, kind: str, request: AuditRequest, roots: Sequence[str | Path]
) -> int:
    """Queue the audit of a split already on the server (``path`` already checked against ``roots``)."""
    from splitaudit.indexer.sources.manifest import FORMATS

    validate_request(ws, request)
    if kind == "manifest" and (not path.is_file() or path.suffix.lower() not in FORMATS):
        raise InputError(f"{path} is not a manifest file (.csv, .tsv, .jsonl or .parquet)")
    if kind == "folder" and not path.is_dir():
        raise InputError(f"{path} is not a folder on the server")
    source = open_requested_split(path, request, what=kind)
    check_split_files(source, roots, what=kind)
    return queue_audit(
        ws,
        source,
        request,
        root=str(path if kind == "folder" else path.parent),
        params={"origin": kind, "path": str(path), "allowed_roots": real_roots(roots)},
    )


def remove_tree(path: Path) -> None:
    """Delete an upload folder, logging (not raising) on failure."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc)


def queue_index_job(
    session: Session,
    *,
    corpus: str,
    sources: Sequence[Path],
    model: str | None,
    no_embed: bool | None,
    workers: int,
    allowed_roots: Sequence[str | Path],
    models_roots: Sequence[str | Path] = (),
) -> int:
    """Queue (flush, not commit) a server-side index run of ``sources`` into ``corpus``; the job id.

    The job re-checks, when it runs, that every file it reads lies under ``allowed_roots``
    and that a checkpoint model lies under ``models_roots``.
    """
    row = get_corpus(session, name=corpus)
    if model and row.model_spec and model != row.model_spec:
        raise ConflictError(
            f"corpus {corpus!r} is indexed with model {row.model_spec!r}, not {model!r}; "
            "omit 'model' to use the corpus's own, or index into a new corpus"
        )
    if no_embed is None:
        no_embed = row.model_id is None and row.model_spec is None
    if model and not no_embed:
        from splitaudit.app.paths import check_model_spec

        check_model_spec(model, models_roots)
    job = enqueue(
        session,
        kind="index",
        params={
            "corpus": corpus,
            "sources": [str(p) for p in sources],
            "model": model or row.model_spec,
            "no_embed": bool(no_embed),
            "workers": workers,
            "allowed_roots": real_roots(allowed_roots),
            "models_roots": real_roots(models_roots),
        },
    )
    return job.id
