"""End to end through the CLI: an audit asks the corpus model for the content cosine of a pair
whose geometric fit was refused as an overlay, and that cosine decides whether the pair is
semantic (issue 22: two photos in the same window chrome are not semantic unless their
content is similar).

The tiny test model's cosines mean nothing, so the content cosine is replaced by one chosen
from the corpus photo under the chrome: similar for the colour photo, unrelated for the grey
one. The rest is the real audit: the wiring from the audit service to the engine, the fits,
the rule, the evidence. With the wiring gone, both pairs would be semantic.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.chrome_images import window_chrome
from PIL import Image

from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.match import content_region

pytestmark = pytest.mark.slow
SEMANTIC = -0.5  # every pair of the tiny model's vectors scores above this


def _colourful(image: Image.Image) -> bool:
    """Whether the middle of ``image`` (the photo inside the chrome) is in colour."""
    w, h = image.size
    middle = image.convert("RGB").crop((w // 3, h // 3, 2 * w // 3, 2 * h // 3))
    return float(np.asarray(middle.convert("HSV"))[..., 1].mean()) > 40.0


@pytest.fixture(scope="module")
def audited(
    tmp_path_factory: pytest.TempPathFactory, tiny_model_spec: str
) -> tuple[dict[str, Any], list[tuple[bool, bool]]]:
    """Corpus: the cat (colour) and the camera (grey) in one viewer window. Split: the rocket in
    the same window. Returns the report and, per content cosine asked, (colour photo, an
    embedder was given)."""
    root = tmp_path_factory.mktemp("overlay-semantic")
    corpus, split, home = root / "corpus", root / "split", root / "home"
    corpus.mkdir()
    split.mkdir()
    window_chrome(sample_photo("chelsea")).save(corpus / "chrome_chelsea.png")
    window_chrome(sample_photo("camera")).save(corpus / "chrome_camera.png")
    window_chrome(sample_photo("rocket")).save(split / "chrome_rocket.png")
    asked: list[tuple[bool, bool]] = []
    real: Callable[..., float | None] = content_region.content_cosine

    def chosen(query: Image.Image, image: Image.Image, match: Any, embed: Any) -> float | None:
        if real(query, image, match, embed) is None:  # no content box: the rule does not apply
            return None
        asked.append((_colourful(image), embed is not None))
        return 0.9 if _colourful(image) else -0.9

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(content_region, "content_cosine", chosen)
        runner = CliRunner()
        indexed = runner.invoke(
            cli,
            [
                "index",
                str(corpus),
                "--corpus",
                "c",
                "--home",
                str(home),
                "--model",
                tiny_model_spec,
            ],
        )
        assert indexed.exit_code == 0, indexed.output
        out = root / "report.json"
        audit = ["audit", str(split), "--corpus", "c", "--home", str(home), "--json", str(out)]
        th = ["--threshold", "candidate_cosine=-1", "--threshold", f"semantic_cosine={SEMANTIC}"]
        audited = runner.invoke(cli, [*audit, *th])
        assert audited.exit_code in (0, 1), audited.output
    return json.loads(Path(out).read_text()), asked


def test_the_audit_asks_the_corpus_model_for_the_content_cosine(
    audited: tuple[dict[str, Any], list[tuple[bool, bool]]],
) -> None:
    _report, asked = audited
    assert sorted(asked) == [(False, True), (True, True)]


def test_the_content_cosine_decides_the_semantic_verdict(
    audited: tuple[dict[str, Any], list[tuple[bool, bool]]],
) -> None:
    report, _asked = audited
    item = next(it for it in report["items"] if it["key"] == "chrome_rocket.png")
    kinds = {m["corpus_key"]: m for m in item["matches"]}
    assert "chrome_camera.png" not in kinds  # unrelated content under the same chrome
    similar = kinds["chrome_chelsea.png"]
    assert similar["kind"] == "semantic"
    assert similar["evidence"]["content_cosine"] == 0.9
