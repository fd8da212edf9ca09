"""``splitaudit demo``: index a generated corpus and audit a split with planted leaks, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import click

from splitaudit.indexer.cli.backend_option import backend_option, export_cache_dir
from splitaudit.indexer.cli.common import handle_errors, home_option, open_workspace


@click.command()
@home_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the generated corpus, split and reports [default: HOME/demo].",
)
@click.option(
    "--model",
    "model_spec",
    default="efficientnet-lite0",
    show_default=True,
    help="Embedding model for the demo corpus (the bundled offline encoder by default).",
)
@backend_option
@handle_errors
def demo(home: Path, out: Path | None, model_spec: str, backend: str) -> None:
    """Generate a small corpus and a test split with planted leaks, index, audit, report.

    Everything runs locally on the embedded defaults (SQLite + FAISS under --home); the
    generated data and the reports go to HOME/demo, so a checkout stays clean.
    """
    from splitaudit.indexer.audit.service import create_audit, create_split, run_audit
    from splitaudit.indexer.demo import write_demo
    from splitaudit.indexer.embed.backends import backend_embedder_factory
    from splitaudit.indexer.kinds import MATCH_KINDS
    from splitaudit.indexer.pipeline.index import index_sources
    from splitaudit.indexer.reporting.formats import render
    from splitaudit.indexer.reporting.html_report import html_page
    from splitaudit.indexer.reporting.html_thumbs import db_thumbnail_fetcher
    from splitaudit.indexer.reporting.report import build_report
    from splitaudit.indexer.sources.folder import FolderSource
    from splitaudit.indexer.sources.open import open_split

    out = home / "demo" if out is None else out
    from splitaudit.indexer.embed.loader import require_embed_stack

    require_embed_stack(model_spec, bundled=model_spec == "efficientnet-lite0")  # before any work
    load_model = backend_embedder_factory(backend, export_cache_dir(home))  # checks the backend
    data = write_demo(out)
    click.echo(f"wrote demo corpus to {data.corpus} and test split to {data.split}")
    ws = open_workspace(home)
    try:
        summary = index_sources(
            ws,
            "demo",
            [FolderSource(data.corpus)],
            embedder=load_model(model_spec),
            model_spec=model_spec,
        )
        click.echo(
            f"indexed corpus 'demo': {summary.indexed} new, {summary.skipped} already present"
        )
        split_id = create_split(ws, open_split(str(data.split)), name="demo-split")
        audit_id = create_audit(ws, split_id=split_id, corpora=["demo"])
        run_audit(ws, audit_id, embedder_factory=load_model)
        with ws.sessions() as s:
            report = build_report(s, audit_id)
            html = html_page(report, db_thumbnail_fetcher(s))
    finally:
        ws.close()
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    (out / "report.md").write_text(render(report, "md"))
    (out / "report.html").write_text(html, encoding="utf-8")
    sm = report.summary
    per_kind = ", ".join(f"{k} {sm.by_kind.get(k, 0)}" for k in MATCH_KINDS)
    click.echo(
        f"audit {audit_id}: {sm.items} test images, {sm.flagged} flagged ({per_kind}); "
        f"planted leaks: {len(data.planted)}"
    )
    for item in report.items:
        if item.verdict != "clean":
            top = item.matches[0]
            click.echo(
                f"  {item.key}: {item.verdict} -> {top.corpus_key} "
                f"(hamming {top.hamming}, cosine {top.cosine})"
            )
    click.echo(
        f"reports: {out / 'report.json'}, {out / 'report.md'}, {out / 'report.html'} (open in a browser)"
    )
    click.echo(
        f"browse and review: splitaudit serve --home {home}  (then open http://127.0.0.1:8000/ui)"
    )
