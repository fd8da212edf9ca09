"""The Python API: ``index``, ``audit``, ``dedup`` and ``Client``, thin shells over the CLI's functions.

Each call opens the home folder (SQLite + FAISS stores, or ``database_url``), does its work
and closes it again: no state survives a call but what the home folder holds. Progress
shows as tqdm bars (widgets in a notebook); ``progress=False`` turns them off.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from splitaudit.indexer.errors import UsageError
from splitaudit.results import AuditResult, DedupResult, report_dict

if TYPE_CHECKING:
    from splitaudit.indexer.pipeline.index import IndexSummary
    from splitaudit.indexer.workspace import Workspace

__all__ = ["DEFAULT_FAIL_ON", "DEFAULT_MODEL_SPEC", "Client", "audit", "dedup", "index"]

PathLike = str | os.PathLike[str]
DEFAULT_MODEL_SPEC = "ViT-B-32:laion2b_s34b_b79k"
DEFAULT_FAIL_ON = ("exact", "near")


def _home(home: PathLike | None) -> Path:
    """``home``, else ``$SPLITAUDIT_HOME``, else ``./.splitaudit`` (as the CLI)."""
    if home is not None:
        return Path(home)
    return Path(os.environ.get("SPLITAUDIT_HOME") or ".splitaudit")


@contextmanager
def _workspace(home: PathLike | None, database_url: str | None) -> Iterator[Workspace]:
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(_home(home), database_url or os.environ.get("SPLITAUDIT_DATABASE_URL"))
    try:
        yield ws
    finally:
        ws.close()


def _as_list(values: PathLike | Iterable[PathLike]) -> list[str]:
    if isinstance(values, (str, os.PathLike)):
        return [os.fspath(values)]
    return [os.fspath(v) for v in values]


@contextmanager
def _count_bar(desc: str, enabled: bool) -> Iterator[Callable[[int], None]]:
    """A counting tqdm bar (``tqdm.auto``: a widget in a notebook); a no-op when disabled."""
    if not enabled:
        yield lambda _n: None
        return
    from tqdm.auto import tqdm

    with tqdm(desc=desc, unit="img", mininterval=0.5) as bar:
        yield bar.update


@contextmanager
def _fraction_bar(desc: str, enabled: bool) -> Iterator[Callable[[float, str], None]]:
    """A 0-100 % tqdm bar fed ``(fraction, phase)``; a no-op when disabled."""
    if not enabled:
        yield lambda _f, _m: None
        return
    from tqdm.auto import tqdm

    with tqdm(
        total=100,
        desc=desc,
        unit="%",
        mininterval=0.5,
        bar_format="{l_bar}{bar}| {elapsed} {postfix}",
    ) as bar:

        def update(fraction: float, message: str) -> None:
            bar.n = round(100 * max(0.0, min(1.0, fraction)))
            bar.set_postfix_str(message, refresh=False)
            bar.refresh()

        yield update


def _corpus_model(ws: Workspace, corpus: str) -> str | None:
    """The model spec an existing corpus was indexed with (None: new, or hash-only)."""
    from sqlalchemy import select

    from splitaudit.indexer.db.models import Corpus

    with ws.sessions() as s:
        return s.scalar(select(Corpus.model_spec).where(Corpus.name == corpus))


def _embedder_factory(home: Path, device: str, backend: str) -> Callable[[str], Any]:
    from splitaudit.indexer.embed.backends import export_cache_dir, load_embedder_on_backend

    def load(spec: str) -> Any:
        return load_embedder_on_backend(
            spec, backend=backend, cache_dir=export_cache_dir(home), device=device
        )

    return load


def index(
    sources: PathLike | Iterable[PathLike],
    *,
    corpus: str,
    home: PathLike | None = None,
    model: str | None = None,
    embed: bool = True,
    workers: int = 1,
    device: str = "cpu",
    backend: str = "auto",
    image_column: str | None = None,
    key_column: str | None = None,
    database_url: str | None = None,
    progress: bool = True,
) -> IndexSummary:
    """Index ``sources`` (folders, manifests, WebDataset shards, archives, Hugging Face datasets) into ``corpus``.

    ``model``: an open_clip ``NAME:TAG``, a checkpoint path or ``efficientnet-lite0``; by
    default the model the corpus was indexed with, or ``ViT-B-32:laion2b_s34b_b79k`` for a
    new corpus. ``embed=False`` stores hashes only (no semantic tier, no torch needed).
    Re-indexing the same sources adds nothing. Returns the run's ``IndexSummary``.
    """
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.open import open_source
    from splitaudit.indexer.workspace import check_corpus_name

    check_corpus_name(corpus)
    if workers < 1:
        raise UsageError(f"workers must be at least 1, got {workers}")
    opened = [
        open_source(s, image_column=image_column, key_column=key_column) for s in _as_list(sources)
    ]
    with _workspace(home, database_url) as ws:
        embedder, spec = None, None
        if embed:
            spec = model or _corpus_model(ws, corpus) or DEFAULT_MODEL_SPEC
            embedder = _embedder_factory(_home(home), device, backend)(spec)
        with _count_bar(f"indexing {corpus}", progress) as done:
            return index_sources(
                ws,
                corpus,
                opened,
                embedder=embedder,
                workers=workers,
                progress=done,
                model_spec=spec if embedder is not None else None,
            )


def _policy(
    fail_on: str | Iterable[str],
    max_rate: float | None,
    max_count: int | None,
    max_unreadable: int | None,
    thresholds: Mapping[str, float] | None,
) -> Any:
    from splitaudit.indexer.gate.policy import Policy

    return Policy(
        fail_on=fail_on,  # type: ignore[arg-type]  # Policy parses a string or an iterable
        max_rate=max_rate,
        max_count=max_count,
        max_unreadable=max_unreadable,
        thresholds=dict(thresholds or {}),
    )


def audit(
    split: PathLike,
    *,
    corpus: str | Sequence[str],
    home: PathLike | None = None,
    fail_on: str | Iterable[str] = DEFAULT_FAIL_ON,
    max_rate: float | None = None,
    max_count: int | None = None,
    max_unreadable: int | None = None,
    labels: Mapping[str, str] | PathLike | None = None,
    thresholds: Mapping[str, float] | None = None,
    workers: int = 1,
    device: str = "cpu",
    backend: str = "auto",
    image_column: str | None = None,
    key_column: str | None = None,
    database_url: str | None = None,
    progress: bool = True,
) -> AuditResult:
    """Audit ``split`` (folder, ImageFolder, manifest, archive, image file or Hugging Face dataset) against ``corpus``.

    Returns an ``AuditResult``: the ``splitaudit.report/v1`` report (``result.report``, also
    readable as ``result["summary"]`` ...), the gate verdict under ``fail_on`` / ``max_rate``
    / ``max_count`` (``result.passed``, ``result.exit_code``) and ``result.to_pandas()``.
    ``labels``: ``{key: label}`` or a CSV ``key,label`` file.
    """
    from splitaudit.indexer.audit.service import run_audit, submit_audit
    from splitaudit.indexer.gate.evaluate import evaluate
    from splitaudit.indexer.sources.open import split_location

    corpora = [corpus] if isinstance(corpus, str) else list(corpus)
    if not corpora:
        raise UsageError("audit needs at least one corpus")
    policy = _policy(fail_on, max_rate, max_count, max_unreadable, thresholds)
    label_map: Mapping[str, str] | None
    if labels is None or isinstance(labels, Mapping):
        label_map = labels
    else:
        from splitaudit.indexer.sources.labels_csv import load_labels_csv

        label_map = load_labels_csv(Path(labels))
    home_dir = _home(home)
    if not home_dir.is_dir() and database_url is None:
        from splitaudit.indexer.errors import IndexUnavailableError

        raise IndexUnavailableError(
            f"no splitaudit index at {home_dir}: build it with splitaudit.index(SOURCE, "
            f"corpus=NAME, home={str(home_dir)!r})"
        )
    with (
        tempfile.TemporaryDirectory(prefix="splitaudit-split-") as workdir,
        _workspace(home_dir, database_url) as ws,
    ):
        location = split_location(
            split, workdir=workdir, image_column=image_column, key_column=key_column
        )
        audit_id = submit_audit(
            ws,
            split_uri=location,
            name=Path(split).resolve().name or str(split),
            corpora=corpora,
            labels=label_map,
            root=os.fspath(split),
            thresholds=dict(policy.thresholds),
        )
        with _fraction_bar("auditing", progress) as update:
            run_audit(
                ws,
                audit_id,
                progress=update,
                workers=workers,
                embedder_factory=_embedder_factory(home_dir, device, backend),
            )
        with ws.sessions() as session:
            report = _build_report(session, audit_id)
    return AuditResult(report=report, gate=evaluate(report_dict(report), policy))


def _build_report(session: Any, audit_id: int) -> Any:
    """The reporting module's report: the typed ``Report`` where it exists, else its JSON dict."""
    from splitaudit.indexer.reporting import report as reporting

    build = getattr(reporting, "build_report", None)
    return (
        build(session, audit_id) if build is not None else reporting.audit_report(session, audit_id)
    )


def _typed(report: dict[str, Any]) -> Any:
    """A server's JSON report as the typed ``Report`` where the reporting module has one."""
    try:
        from splitaudit.indexer.reporting.models import as_report
    except ImportError:
        return report
    return as_report(report)


def dedup(
    *,
    corpus: str,
    home: PathLike | None = None,
    keep: str = "largest",
    semantic: bool = False,
    thresholds: Mapping[str, float] | None = None,
    database_url: str | None = None,
    progress: bool = True,
) -> DedupResult:
    """Find exact and near duplicate clusters within ``corpus`` and choose one member of each to keep.

    Returns a ``DedupResult``: ``clusters``, ``drop`` / ``drop_keys`` (every non-kept member),
    ``summary`` and ``to_pandas()`` (one row per member). ``keep``: the policy choosing the kept
    member (``largest``, ``first``, ...; see ``splitaudit dedup --help``).
    """
    from splitaudit.indexer.dedup.outputs import dedup_report, drop_rows
    from splitaudit.indexer.dedup.service import create_dedup, run_dedup

    with _workspace(home, database_url) as ws:
        run_id = create_dedup(
            ws,
            corpus=corpus,
            keep=keep,
            semantic=semantic,
            thresholds=dict(thresholds or {}),
            resume=True,
        )
        with _fraction_bar(f"dedup {corpus}", progress) as update:
            run_dedup(ws, run_id, progress=update)
        with ws.sessions() as s:
            return DedupResult(
                run_id=run_id, report=dedup_report(s, run_id), drop=drop_rows(s, run_id)
            )


class Client:
    """A splitaudit server (``splitaudit serve``): upload a split, wait for its audit, read the report.

    ``Client(url, token)``; use it as a context manager (or call ``close()``).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        transport: Any = None,
    ) -> None:
        from splitaudit.indexer.gate.client import AuditClient

        self._client = AuditClient(url, token=token, timeout=timeout, transport=transport)
        self.url = self._client.base_url

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def submit(
        self,
        split: PathLike,
        *,
        corpus: str | Sequence[str],
        labels: PathLike | None = None,
        thresholds: Mapping[str, float] | None = None,
    ) -> int:
        """Upload ``split`` (a folder, zipped on the fly, or a zip/tar archive); the audit id."""
        corpora = [corpus] if isinstance(corpus, str) else list(corpus)
        return self._client.submit(
            Path(split),
            corpora=corpora,
            labels=None if labels is None else Path(labels),
            thresholds=thresholds,
        )

    def status(self, audit_id: int) -> dict[str, Any]:
        """The audit's ``status`` (queued, running, done, failed), ``progress`` and ``summary``."""
        return self._client.status(audit_id)

    def report(self, audit_id: int) -> dict[str, Any]:
        """The ``splitaudit.report/v1`` report of a finished audit."""
        return self._client.report(audit_id)

    def audit(
        self,
        split: PathLike,
        *,
        corpus: str | Sequence[str],
        fail_on: str | Iterable[str] = DEFAULT_FAIL_ON,
        max_rate: float | None = None,
        max_count: int | None = None,
        max_unreadable: int | None = None,
        labels: PathLike | None = None,
        thresholds: Mapping[str, float] | None = None,
        timeout: float | None = None,
        progress: bool = True,
    ) -> AuditResult:
        """Upload ``split``, wait for the server's audit and judge it like ``splitaudit.audit``."""
        from splitaudit.indexer.gate.evaluate import evaluate

        policy = _policy(fail_on, max_rate, max_count, max_unreadable, thresholds)
        audit_id = self.submit(split, corpus=corpus, labels=labels, thresholds=policy.thresholds)
        with _fraction_bar(f"audit {audit_id}", progress) as update:
            self._client.wait(audit_id, on_progress=update, timeout=timeout)
        report = self.report(audit_id)
        return AuditResult(report=_typed(report), gate=evaluate(report, policy))

    def __repr__(self) -> str:
        return f"Client({self.url!r})"
