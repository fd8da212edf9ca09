"""What each job kind does: ``audit`` runs the audit engine, ``index`` indexes server-side sources,
``dedup`` deduplicates a corpus."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select

from splitaudit.indexer.db.models import Audit, Corpus
from splitaudit.indexer.embed.protocol import Embedder
from splitaudit.indexer.errors import InputError, NotFoundError, PathNotAllowedError
from splitaudit.indexer.jobs.queue import ClaimedJob
from splitaudit.indexer.jobs.worker import Handler, JobCancelled, JobOutcome, ProgressFn
from splitaudit.indexer.sources.record import Source
from splitaudit.indexer.workspace import Workspace

log = logging.getLogger(__name__)


def audit_id_of(ws: Workspace, job: ClaimedJob) -> int:
    """The audit a job runs (``params["audit_id"]``, else the audit row pointing at the job)."""
    audit_id = job.params.get("audit_id")
    if isinstance(audit_id, int):
        return audit_id
    with ws.sessions() as s:
        found = s.scalar(select(Audit.id).where(Audit.job_id == job.id))
    if found is None:
        raise NotFoundError(f"job {job.id} has no audit attached; submit the audit again")
    return found


def _load_embedder(ws: Workspace, spec: str, *, device: str, backend: str) -> Embedder:
    """The worker's embedder for ``spec`` on its device and inference backend (the one factory)."""
    from splitaudit.indexer.embed.device import resolve_device
    from splitaudit.indexer.runtime.embedders import load_embedder

    return load_embedder(spec, home=ws.home, backend=backend, device=resolve_device(device))


def run_audit_job(
    ws: Workspace,
    job: ClaimedJob,
    progress: ProgressFn,
    *,
    device: str = "auto",
    backend: str = "auto",
) -> JobOutcome:
    """Run (or re-run from scratch: the engine is idempotent) the audit of ``job``."""
    from splitaudit.indexer.audit.prune import prune_upload
    from splitaudit.indexer.audit.service import execute_audit

    def factory(spec: str) -> Embedder:
        return _load_embedder(ws, spec, device=device, backend=backend)

    audit_id = audit_id_of(ws, job)
    execute_audit(ws, audit_id, progress=progress, embedder_factory=factory)
    # Once the job is recorded done (a retry before that re-reads every file), an upload
    # keeps only the images review shows.
    return JobOutcome(
        message=f"audit {audit_id} done", after_done=lambda: _prune(ws, audit_id, prune_upload)
    )


def _prune(ws: Workspace, audit_id: int, prune: Callable[[Workspace, int], int]) -> None:
    try:
        prune(ws, audit_id)
    except OSError as exc:
        log.warning("audit %d: could not clean its upload: %s", audit_id, exc)


def run_index_job(
    ws: Workspace,
    job: ClaimedJob,
    progress: ProgressFn,
    *,
    device: str = "auto",
    backend: str = "auto",
) -> JobOutcome:
    """Index the server-side sources of ``job`` into its corpus (resumes like the CLI).

    With ``params["allowed_roots"]`` (set by the API), manifest rows naming files outside
    those roots become failed items instead of being read.
    """
    from splitaudit.indexer.embed.loader import DEFAULT_MODEL_SPEC
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.sources.open import open_source

    params: Mapping[str, Any] = job.params
    corpus_name = str(params.get("corpus", ""))
    paths = [str(p) for p in params.get("sources", [])]
    if not corpus_name or not paths:
        raise InputError(f"index job {job.id} names no corpus or no sources")
    no_embed = bool(params.get("no_embed", False))
    model_spec = params.get("model")
    if not no_embed and not model_spec:
        with ws.sessions() as s:
            model_spec = s.scalar(select(Corpus.model_spec).where(Corpus.name == corpus_name))
        model_spec = model_spec or DEFAULT_MODEL_SPEC
    if not no_embed and "models_roots" in params:
        _check_model_under(str(model_spec), params["models_roots"])
    sources = [_restricted(open_source(p), params.get("allowed_roots")) for p in paths]
    embedder = (
        None if no_embed else _load_embedder(ws, str(model_spec), device=device, backend=backend)
    )
    done = 0

    def count(n: int) -> None:
        nonlocal done
        done += n
        progress(0.0, f"{done} images processed")

    summary = index_sources(
        ws,
        corpus_name,
        sources,
        embedder=embedder,
        workers=int(params.get("workers", 1)),
        progress=count,
        model_spec=None if no_embed else str(model_spec),
    )
    return JobOutcome(
        message=f"indexed {summary.indexed}, already present {summary.skipped}, failed {summary.failed}",
        result=summary.to_dict(),
    )


def run_dedup_job(ws: Workspace, job: ClaimedJob, progress: ProgressFn) -> JobOutcome:
    """Run (or resume: committed chunks are kept) the dedup run of ``job``."""
    from splitaudit.indexer.dedup.service import run_dedup

    run_id = job.params.get("dedup_id")
    if not isinstance(run_id, int):
        raise InputError(f"dedup job {job.id} names no dedup run; submit it again")
    try:
        summary = run_dedup(ws, run_id, progress=progress)
    except JobCancelled:
        _requeued_dedup(ws, run_id)  # the run says what its job says: waiting to run again
        raise
    return JobOutcome(
        message=f"dedup {run_id} done: {summary['clusters']} clusters, "
        f"{summary['duplicates']} duplicates",
        result=summary,
    )


def _requeued_dedup(ws: Workspace, run_id: int) -> None:
    """A stopped dedup run is ``queued`` again (committed chunks kept), not ``running``/``failed``."""
    from splitaudit.indexer.db.engine import transaction
    from splitaudit.indexer.db.models import DedupRun

    try:
        with transaction(ws.sessions) as s:
            run = s.get(DedupRun, run_id)
            if run is not None and run.status != "done":
                run.status, run.error = "queued", None
    except Exception:  # the job is handed back either way; its next run sets the status
        log.warning("dedup %d: could not mark it queued", run_id, exc_info=True)


def _restricted(source: Source, allowed_roots: Any) -> Source:
    """``source`` whose records may only name files under ``allowed_roots`` (when given).

    Checked per record when it is read (symlinks resolved), so a link inside a folder that
    points out of the roots, or one swapped in after submission, becomes a failed item whose
    reason names only the path; its target is never opened.
    """
    from splitaudit.indexer.pipeline.precomputed import is_precomputed
    from splitaudit.indexer.sources.manifest import ManifestSource
    from splitaudit.indexer.sources.roots import RootedSource

    if allowed_roots is None:
        return source
    roots = [str(r) for r in allowed_roots]
    if isinstance(source, ManifestSource):
        source = ManifestSource(source.path, allowed_roots=roots)
    if is_precomputed(source):
        return source  # vectors and metadata only: no image file is opened
    return RootedSource(source, roots)


def _check_model_under(spec: str, models_roots: Any) -> None:
    """A checkpoint model of an API job must still lie under the models roots (registry names pass)."""
    from splitaudit.indexer.embed.spec import parse_model_spec
    from splitaudit.indexer.sources.roots import is_under_roots

    if parse_model_spec(spec).kind in ("registry", "bundled"):
        return
    text = spec.strip()
    raw = text.removeprefix("local-dir:") if text.startswith("local-dir:") else text
    if parse_model_spec(spec).kind == "weights":
        raw = text.partition(":")[2]
    roots = [str(r) for r in models_roots or []]
    if not roots or not os.path.isabs(raw) or not is_under_roots(raw, roots):
        raise PathNotAllowedError(
            "the job's model is not a registry name and lies outside the server's models roots "
            "(SPLITAUDIT_MODELS_ROOTS); index with a registry model or a checkpoint under a root"
        )


def default_handlers(*, device: str = "auto", backend: str = "auto") -> dict[str, Handler]:
    """The handler of every job kind; embedding runs on ``device`` (``splitaudit.indexer.embed.device``) with
    the inference ``backend`` (``splitaudit.indexer.embed.backends``)."""
    return {
        "audit": functools.partial(run_audit_job, device=device, backend=backend),
        "index": functools.partial(run_index_job, device=device, backend=backend),
        "dedup": run_dedup_job,
    }
