"""The self-contained HTML report: pairs strongest first, capped, escaped, no external resource."""

from __future__ import annotations

import io
import re
from typing import Any

from PIL import Image

from splitaudit.indexer.reporting.html_report import flagged_pairs, pair_thumbnails, render_html
from splitaudit.indexer.reporting.html_thumbs import EmbeddedImage, Side, data_uri
from splitaudit.indexer.reporting.models import GateView, PolicyView, SuppressedView
from splitaudit.indexer.thumbnails import SourceMissingError


def _jpeg(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 16), color).save(out, format="JPEG")
    return out.getvalue()


def _report(n_near: int = 3) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {
            "split_item_id": 1,
            "key": "cat/<script>alert(1)</script>.jpg",
            "label": "cat",
            "verdict": "exact",
            "matches": [
                {
                    "id": 10,
                    "kind": "exact",
                    "corpus": "laion",
                    "corpus_key": "a&b.jpg",
                    "corpus_item_id": 100,
                    "hamming": 0,
                    "cosine": None,
                    "score": 1.0,
                    "evidence": {},
                    "review": None,
                    "caption": "a cat on a mat",
                    "uri": "/data/a&b.jpg",
                }
            ],
        }
    ]
    for i in range(n_near):
        items.append(
            {
                "split_item_id": 2 + i,
                "key": f"dog/{i}.jpg",
                "label": "dog",
                "verdict": "near",
                "matches": [
                    {
                        "id": 20 + i,
                        "kind": "near",
                        "corpus": "laion",
                        "corpus_key": f"n{i}.jpg",
                        "corpus_item_id": 200 + i,
                        "hamming": 4,
                        "cosine": 0.9 + i / 100,
                        "score": 0.9 + i / 100,
                        "evidence": {},
                        "review": None,
                    }
                ],
            }
        )
    items.append(
        {
            "split_item_id": 9,
            "key": "bird/own_bird.jpg",
            "label": "bird",
            "verdict": "label_leak",
            "matches": [
                {
                    "id": 30,
                    "kind": "label_leak",
                    "corpus": None,
                    "corpus_key": None,
                    "corpus_item_id": None,
                    "score": None,
                    "evidence": {"term": "bird", "field": "filename"},
                    "review": None,
                }
            ],
        }
    )
    items.append(
        {"split_item_id": 8, "key": "clean.jpg", "label": None, "verdict": "clean", "matches": []}
    )
    return {
        "schema": "splitaudit.report/v1",
        "audit_id": 7,
        "split": {"id": 1, "name": "test"},
        "corpora": ["laion"],
        "summary": {
            "items": len(items),
            "flagged": len(items) - 1,
            "by_kind": {"exact": 1, "near": n_near, "semantic": 0, "label_leak": 1},
        },
        "model": {"id": "tiny", "semantic": "ok"},
        "items": items,
        "failed": [{"key": "broken.jpg", "reason": "truncated JPEG"}],
        "split_duplicates": [],
    }


def _thumbs(report: dict[str, Any]) -> dict[tuple[Side, int], EmbeddedImage]:
    def fetch(side: Side, item_id: int) -> bytes:
        if item_id == 201:
            raise SourceMissingError(
                "original bytes of corpus item 201 are not available (deleted)"
            )
        return _jpeg((item_id % 255, 40, 90) if side == "corpus" else (10, item_id % 255, 10))

    return pair_thumbnails(report, fetch)


def test_pairs_are_ordered_strongest_first() -> None:
    kinds_scores = [(m.kind, m.score) for _i, m in flagged_pairs(_report())]
    assert kinds_scores == [
        ("exact", 1.0),
        ("near", 0.92),
        ("near", 0.91),
        ("near", 0.9),
        ("label_leak", None),
    ]


def test_every_pair_side_by_side_with_inline_thumbnails_and_reasons() -> None:
    report = _report()
    page = render_html(report, thumbnails=_thumbs(report))
    assert page.count('<section class="pair') == 5
    sources = re.findall(r'<img src="([^"]+)"', page)
    # 5 test images + 4 corpus images, less the one whose bytes are gone (its reason is shown instead).
    assert len(sources) == 8 and all(s.startswith("data:image/jpeg;base64,") for s in sources)
    assert (
        "image not available: original bytes of corpus item 201 are not available (deleted)" in page
    )
    assert "own filename / path / metadata" in page and "&#x27;bird&#x27; in filename" in page
    assert "<strong>5</strong> of <strong>6</strong>" in page
    assert "truncated JPEG" in page and "a cat on a mat" in page


def test_nothing_leaves_the_page_and_user_text_is_escaped() -> None:
    report = _report()
    page = render_html(report, thumbnails=_thumbs(report))
    assert "<script" not in page and "&lt;script&gt;" in page and "a&amp;b.jpg" in page
    assert "default-src 'none'" in page
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "http://" not in page and "https://" not in page


def test_large_reports_are_capped_with_the_count_of_the_rest() -> None:
    report = _report(n_near=30)
    fetched: list[tuple[str, int]] = []

    def fetch(side: Side, item_id: int) -> bytes:
        fetched.append((side, item_id))
        return _jpeg((1, 2, 3))

    thumbs = pair_thumbnails(report, fetch, limit=10)
    page = render_html(report, thumbnails=thumbs, limit=10)
    assert page.count('<section class="pair') == 10
    assert "22 more pairs not shown" in page and "Flagged pairs (10 of 32)" in page
    assert len(fetched) == len(set(fetched)) == 20  # only the pairs shown, each image once


def test_embedded_thumbnail_round_trips() -> None:
    data = _jpeg((200, 10, 10))
    uri = data_uri(data)
    import base64

    decoded = base64.b64decode(uri.split(",", 1)[1])
    assert decoded == data and Image.open(io.BytesIO(decoded)).size == (24, 16)


def test_gate_verdict_and_suppressed_pairs_are_shown() -> None:
    report = _report()
    second = report["items"][1]
    gate = GateView(
        status="failed",
        passed=False,
        reasons=["1 exact > 0 allowed"],
        items=6,
        readable=6,
        flagged=1,
        rate=1 / 6,
        policy=PolicyView(fail_on=["exact", "near"]),
        counts={"exact": 1, "near": 2},
        suppressed=[
            SuppressedView(
                key=second["key"], kind=second["matches"][0]["kind"], by="baseline", index=0
            )
        ],
    )
    page = render_html(report, thumbnails=_thumbs(report), gate=gate)
    assert "gate" not in report  # the verdict is a value of its own, never written into the report
    assert '<div class="gate failed">Gate FAILED: 1 exact &gt; 0 allowed</div>' in page
    assert page.count('class="pair suppressed"') == 1 and "suppressed by baseline" in page
