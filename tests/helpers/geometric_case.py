"""A corpus and a split whose planted crop + rotation only the geometric match can find."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from splitaudit.indexer.audit.service import create_split
from splitaudit.indexer.demo import sample_photo
from splitaudit.indexer.pipeline.index import index_sources
from splitaudit.indexer.sources.folder import FolderSource
from splitaudit.indexer.sources.open import open_split
from splitaudit.indexer.workspace import Workspace


def crop_rotation_case(tmp_path: Path, model_spec: str) -> tuple[Workspace, int]:
    """Corpus ``c`` (the left half of a photo, three other photos) indexed with ``model_spec``,
    and split ``s``: ``planted.jpg``, 50% of the left half's side rotated 10 degrees and
    re-encoded, and ``sibling.jpg``, a region of the right half (no shared pixels).

    Returns the workspace and the split's id.
    """
    from splitaudit.indexer.embed.loader import load_embedder

    scene = sample_photo("astronaut")  # 512 x 512
    corpus = tmp_path / "corpus" / "all"
    corpus.mkdir(parents=True)
    scene.crop((0, 0, 256, 512)).save(corpus / "left_half.jpg", quality=92)
    for name in ("coffee", "rocket", "camera"):
        sample_photo(name).save(corpus / f"{name}.jpg", quality=92)
    ws = Workspace.open(tmp_path / "home")
    index_sources(
        ws,
        "c",
        [FolderSource(tmp_path / "corpus")],
        embedder=load_embedder(model_spec),
        model_spec=model_spec,
    )
    split = tmp_path / "split"
    split.mkdir()
    crop = scene.crop((64, 200, 192, 328)).resize((256, 256), Image.Resampling.LANCZOS)
    crop.rotate(10, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255)).save(
        split / "planted.jpg", quality=70
    )
    scene.crop((300, 180, 500, 380)).save(split / "sibling.jpg", quality=90)
    return ws, create_split(ws, open_split(str(split)), name="s")
