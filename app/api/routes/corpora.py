"""Corpora: list, create, detail (counts, model, index, failed items), index server-side sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, status
from fastapi.responses import JSONResponse
from sqlalchemy import select

from splitaudit.app.corpora import corpus_detail, corpus_dict, list_corpora
from splitaudit.app.deps import (
    ReaderDep,
    SessionDep,
    SettingsDep,
    TransactionDep,
    WorkspaceDep,
    WriterDep,
)
from splitaudit.app.params import PageQuery, PageSizeQuery
from splitaudit.app.paths import check_links_under, check_model_spec, resolve_under_roots
from splitaudit.app.schemas import (
    CorpusCreate,
    CorpusDetail,
    CorpusList,
    CorpusOut,
    JobAccepted,
    SourcesCreate,
)
from splitaudit.app.settings import ApiSettings
from splitaudit.app.submit import queue_index_job
from splitaudit.indexer.db.models import Corpus
from splitaudit.indexer.errors import ConflictError
from splitaudit.indexer.workspace import check_corpus_name

router = APIRouter(prefix="/corpora", tags=["corpora"])


@router.get("", response_model=CorpusList, response_model_exclude_unset=True)
def corpora_list(session: SessionDep, _caller: ReaderDep) -> dict[str, Any]:
    """Every corpus with its model and counts."""
    items = list_corpora(session)
    return {"items": items, "total": len(items)}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=CorpusOut)
def corpus_create(
    body: CorpusCreate, session: TransactionDep, settings: SettingsDep, _caller: WriterDep
) -> JSONResponse:
    """Create an empty corpus (409 if it exists); ``sources`` also queues an index job."""
    from splitaudit.indexer.embed.spec import DEFAULT_MODEL_SPEC

    name = check_corpus_name(body.name)
    if session.scalar(select(Corpus.id).where(Corpus.name == name)) is not None:
        raise ConflictError(
            f"corpus {name!r} already exists; add sources with POST /api/v1/corpora/{name}/sources"
        )
    paths = _checked_sources(body.sources, settings)
    if body.model and not body.no_embed:
        check_model_spec(body.model, settings.models_roots)
    corpus = Corpus(
        name=name,
        model_spec=None if body.no_embed else (body.model or DEFAULT_MODEL_SPEC),
        generation=0,
    )
    session.add(corpus)
    session.flush()
    out = corpus_dict(session, corpus)
    headers = {"Location": f"/api/v1/corpora/{name}"}
    if paths:
        out["job_id"] = queue_index_job(
            session,
            corpus=name,
            sources=paths,
            model=None,
            no_embed=body.no_embed,
            workers=1,
            allowed_roots=settings.source_roots,
            models_roots=settings.models_roots,
        )
    return JSONResponse(out, status_code=status.HTTP_201_CREATED, headers=headers)


@router.get("/{name}", response_model=CorpusDetail, response_model_exclude_unset=True)
def corpus_get(
    name: str,
    session: SessionDep,
    ws: WorkspaceDep,
    _caller: ReaderDep,
    failed_page: PageQuery = 1,
    failed_page_size: PageSizeQuery = 50,
) -> dict[str, Any]:
    """One corpus: counts, model, saved index info, shards, and a page of failed items with reasons."""
    return corpus_detail(
        ws, session, name=name, failed_page=failed_page, failed_page_size=failed_page_size
    )


@router.post("/{name}/sources", status_code=status.HTTP_202_ACCEPTED, response_model=JobAccepted)
def corpus_add_sources(
    name: str,
    body: SourcesCreate,
    session: TransactionDep,
    settings: SettingsDep,
    _caller: WriterDep,
) -> JSONResponse:
    """Index server-side sources (under a source root) into the corpus, as a background job."""
    paths = _checked_sources(body.sources, settings)
    job_id = queue_index_job(
        session,
        corpus=name,
        sources=paths,
        model=body.model,
        no_embed=body.no_embed,
        workers=body.workers,
        allowed_roots=settings.source_roots,
        models_roots=settings.models_roots,
    )
    accepted = JobAccepted(
        id=job_id,
        job_id=job_id,
        status="queued",
        kind="index",
        links={"self": f"/api/v1/jobs/{job_id}", "corpus": f"/api/v1/corpora/{name}"},
    )
    return JSONResponse(
        accepted.model_dump(),
        status_code=status.HTTP_202_ACCEPTED,
        headers={"Location": f"/api/v1/jobs/{job_id}"},
    )


def _checked_sources(sources: list[str], settings: ApiSettings) -> list[Path]:
    """Each source resolved under a source root, with no symlink inside it leading out."""
    paths = [resolve_under_roots(p, settings.source_roots, what="source") for p in sources]
    for path in paths:
        check_links_under(path, settings.source_roots, what="source folder")
    return paths
