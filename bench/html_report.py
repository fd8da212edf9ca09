"""Cost and size of the self-contained HTML report against the Markdown report of the same audit.

Run: ``.venv/bin/python -m bench.html_report [--pairs 500] [--dir bench/.cache/html-report]``

One run builds ``--pairs`` camera-like JPEGs (256-2400 px, ``bench.photos``) and a report with one
near match per test image (test and corpus image both on disk), then times, by this process's CPU:

- markdown: ``render_markdown`` (the baseline: a text report without images);
- html: ``pair_thumbnails`` (read each original, decode at reduced scale, 160 px JPEG, base64)
  + ``render_html``.

It prints both, their ratio, the page size per pair, and checks that the page references
nothing but data URIs.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Any

from bench.photos import make_photo_corpus
from splitaudit.indexer.reporting.formats import render_markdown
from splitaudit.indexer.reporting.html_report import pair_thumbnails, render_html
from splitaudit.indexer.reporting.html_thumbs import THUMB_PX, THUMB_QUALITY, Side
from splitaudit.indexer.thumbnails import render_thumbnail

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "html-report"


def _report(paths: list[Path]) -> dict[str, Any]:
    items = [
        {
            "split_item_id": i,
            "key": f"test/{p.name}",
            "label": None,
            "verdict": "near",
            "matches": [
                {
                    "id": i,
                    "kind": "near",
                    "corpus": "bench",
                    "corpus_key": p.name,
                    "corpus_item_id": i,
                    "hamming": 3,
                    "cosine": 0.97,
                    "score": 0.97,
                    "evidence": {"phash_hamming": 3},
                    "review": None,
                    "uri": str(p),
                }
            ],
        }
        for i, p in enumerate(paths)
    ]
    return {
        "schema": "splitaudit.report/v1",
        "split": {"name": "bench"},
        "corpora": ["bench"],
        "summary": {
            "items": len(items),
            "flagged": len(items),
            "by_kind": {"exact": 0, "near": len(items), "semantic": 0, "label_leak": 0},
        },
        "model": {"semantic": "ok"},
        "items": items,
        "failed": [],
        "split_duplicates": [],
    }


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args()
    paths = make_photo_corpus(args.dir, args.pairs)[: args.pairs]
    report = _report(paths)

    def fetch(_side: Side, item_id: int) -> bytes:
        return render_thumbnail(paths[item_id].read_bytes(), THUMB_PX, quality=THUMB_QUALITY).data

    start = time.process_time()
    markdown = render_markdown(report, top=args.pairs)
    md_s = time.process_time() - start
    start = time.process_time()
    page = render_html(report, thumbnails=pair_thumbnails(report, fetch), limit=args.pairs)
    html_s = time.process_time() - start
    external = re.findall(r'(?:src|href)="(?!data:)', page)
    print(f"pairs: {args.pairs} (test + corpus image each; camera-like JPEGs, 256-2400 px)")
    print(f"markdown (baseline): {md_s * 1000:8.1f} ms cpu  {len(markdown) / 1024:8.1f} KiB")
    print(
        f"html + thumbnails:   {html_s * 1000:8.1f} ms cpu  {len(page) / 1024:8.1f} KiB "
        f"({len(page) / args.pairs / 1024:.1f} KiB/pair, {html_s / args.pairs * 1000:.2f} ms/pair)"
    )
    print(
        f"ratio html/markdown: {html_s / max(md_s, 1e-9):.0f}x cpu; external references: {len(external)}"
    )


if __name__ == "__main__":
    main()
