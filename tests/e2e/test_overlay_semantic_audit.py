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

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from cli_audit_support import audit_folders
from helpers.chrome_images import window_chrome
from helpers.cli_audit import index_and_audit
from PIL import Image

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
) -> tuple[dict[str, Any], list[bool]]:
    """Corpus: the cat (colour) and the camera (grey) in one viewer window. Split: the rocket in
    the same window. Returns the report and, per content cosine asked, whether the corpus photo
    is the colour one."""
    root = tmp_path_factory.mktemp("overlay-semantic")
    corpus, split, home = audit_folders(root)
    window_chrome(sample_photo("chelsea")).save(corpus / "chrome_chelsea.png")
    window_chrome(sample_photo("camera")).save(corpus / "chrome_camera.png")
    window_chrome(sample_photo("rocket")).save(split / "chrome_rocket.png")
    asked: list[bool] = []
    real: Callable[..., float | None] = content_region.content_cosine

    def chosen(query: Image.Image, image: Image.Image, match: Any, embed: Any) -> float | None:
        if real(query, image, match, embed) is None:  # no content box: the rule does not apply
            return None
        asked.append(_colourful(image))
        return 0.9 if _colourful(image) else -0.9

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(content_region, "content_cosine", chosen)
        report = index_and_audit(
            corpus, split, home, tiny_model_spec, [f"semantic_cosine={SEMANTIC}"]
        )
    return report, asked


def test_the_audit_asks_the_corpus_model_for_the_content_cosine(
    audited: tuple[dict[str, Any], list[bool]],
) -> None:
    _report, asked = audited
    assert sorted(asked) == [False, True]  # one content cosine per corpus photo in the chrome


def test_the_content_cosine_decides_the_semantic_verdict(
    audited: tuple[dict[str, Any], list[bool]],
) -> None:
    report, _asked = audited
    item = next(it for it in report["items"] if it["key"] == "chrome_rocket.png")
    kinds = {m["corpus_key"]: m for m in item["matches"]}
    assert "chrome_camera.png" not in kinds  # unrelated content under the same chrome
    similar = kinds["chrome_chelsea.png"]
    assert similar["kind"] == "semantic"
    assert similar["evidence"]["content_cosine"] == 0.9
