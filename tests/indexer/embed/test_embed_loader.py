"""Tests for ``load_embedder``: tiny checkpoints round trip, bad weights never load, no hub here."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.tiny_model import build_tiny_checkpoint
from PIL import Image

from splitaudit.indexer.embed import DEFAULT_MODEL_SPEC, load_embedder
from splitaudit.indexer.embed.embedder import OpenClipEmbedder
from splitaudit.indexer.embed.loader import weights_digest
from splitaudit.indexer.errors import ModelUnavailableError, UsageError

BIN = "open_clip_pytorch_model.bin"


def _images(n: int, seed: int = 0) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    sizes = [(80, 60), (64, 64), (120, 90), (50, 100)]
    return [
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for w, h in (sizes[i % len(sizes)] for i in range(n))
    ]


@pytest.fixture
def empty_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point huggingface_hub at an empty cache so the machine's own cache cannot interfere."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_default_spec_fails_fast_and_says_what_to_do(empty_hub_cache: Path) -> None:
    with pytest.raises(ModelUnavailableError) as info:
        load_embedder(DEFAULT_MODEL_SPEC)
    message = str(info.value)
    assert "ViT-B-32:laion2b_s34b_b79k" in message
    assert "could not be loaded" in message
    assert "efficientnet-lite0" in message


def test_corrupt_cached_registry_weights_are_refused(empty_hub_cache: Path) -> None:
    # A cache entry that exists but is garbage: the real open_clip path (name + tag) runs
    # offline from the cache and must fail instead of leaving random weights.
    repo = empty_hub_cache / "models--laion--CLIP-ViT-B-32-laion2B-s34B-b79K"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    (snapshot / BIN).write_bytes(b"not a checkpoint")
    with pytest.raises(ModelUnavailableError, match="could not be loaded"):
        load_embedder(DEFAULT_MODEL_SPEC)


def test_unknown_architecture_and_tag_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown open_clip architecture"):
        load_embedder("ViT-Q-99:laion2b_s34b_b79k")
    with pytest.raises(UsageError, match=r"known tags:.*laion2b_s34b_b79k"):
        load_embedder("ViT-B-32:no_such_tag")


def test_unavailable_device_is_a_usage_error(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    with pytest.raises(UsageError, match="device"):
        load_embedder(spec, device="nonsense")


def test_batch_size_below_one_is_a_usage_error(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    with pytest.raises(UsageError, match="batch size"):
        load_embedder(spec, batch_size=0)


def test_tiny_checkpoint_round_trip(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny", seed=0)
    images = _images(5)
    first = load_embedder(spec).embed(images)
    again = load_embedder(spec, batch_size=2).embed(images)
    assert first.shape == (5, 16)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(again, first, atol=1e-5)


def test_same_seed_builds_identical_models(tmp_path: Path) -> None:
    a = load_embedder(build_tiny_checkpoint(tmp_path / "a", seed=3))
    b = load_embedder(build_tiny_checkpoint(tmp_path / "b", seed=3))
    c = load_embedder(build_tiny_checkpoint(tmp_path / "c", seed=4))
    images = _images(3)
    np.testing.assert_array_equal(a.embed(images), b.embed(images))
    assert a.model_id == b.model_id
    assert c.model_id != a.model_id
    assert not np.allclose(c.embed(images), a.embed(images), atol=1e-3)


def test_model_id_names_weights_not_paths(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny", seed=0)
    moved = shutil.copytree(spec, tmp_path / "elsewhere" / "renamed")
    original = load_embedder(spec)
    copy = load_embedder(str(moved))
    digest = weights_digest(Path(spec) / BIN)
    assert original.model_id == copy.model_id
    assert original.model_id.startswith("open_clip:cfg-")
    assert original.model_id.endswith(f":{digest}")
    assert digest.startswith("sha256-") and len(digest) == len("sha256-") + 16
    assert str(tmp_path) not in original.model_id


def test_local_dir_schema_and_safetensors_layout(tmp_path: Path) -> None:
    bin_dir = build_tiny_checkpoint(tmp_path / "bin", seed=1)
    safe_dir = build_tiny_checkpoint(tmp_path / "safe", seed=1, weights_format="safetensors")
    images = _images(2)
    a = load_embedder(f"local-dir:{bin_dir}").embed(images)
    b = load_embedder(safe_dir).embed(images)
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_empty_input_gives_zero_rows(tmp_path: Path) -> None:
    embedder = load_embedder(build_tiny_checkpoint(tmp_path / "tiny"))
    out = embedder.embed([])
    assert out.shape == (0, embedder.dim)
    assert out.dtype == np.float32


def test_non_rgb_images_are_converted(tmp_path: Path) -> None:
    embedder = load_embedder(build_tiny_checkpoint(tmp_path / "tiny"))
    rgb = _images(1)[0]
    np.testing.assert_allclose(
        embedder.embed([rgb.convert("RGBA")]), embedder.embed([rgb]), atol=1e-6
    )
    assert embedder.embed([rgb.convert("L")]).shape == (1, 16)


def test_missing_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        load_embedder(str(tmp_path / "nowhere"))


def test_directory_without_config_is_unavailable(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    (Path(spec) / "open_clip_config.json").unlink()
    with pytest.raises(ModelUnavailableError, match=r"open_clip_config\.json"):
        load_embedder(spec)


def test_directory_without_weights_is_unavailable_not_random(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    (Path(spec) / BIN).unlink()
    with pytest.raises(ModelUnavailableError, match="no weights file"):
        load_embedder(spec)


def test_corrupt_weights_are_unavailable(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    weights = Path(spec) / BIN
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(ModelUnavailableError, match="could not be loaded"):
        load_embedder(spec)


def test_truncated_safetensors_are_unavailable(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny", weights_format="safetensors")
    weights = Path(spec) / "open_clip_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(ModelUnavailableError, match="could not be loaded"):
        load_embedder(spec)


def test_missing_keys_are_unavailable(tmp_path: Path) -> None:
    import torch

    spec = build_tiny_checkpoint(tmp_path / "tiny")
    weights = Path(spec) / BIN
    state = torch.load(weights, weights_only=True)
    del state["visual.proj"]
    torch.save(state, weights)
    with pytest.raises(ModelUnavailableError, match=r"visual\.proj"):
        load_embedder(spec)


def test_unexpected_keys_are_unavailable(tmp_path: Path) -> None:
    import torch

    spec = build_tiny_checkpoint(tmp_path / "tiny")
    weights = Path(spec) / BIN
    state = torch.load(weights, weights_only=True)
    state["visual.extra_head.weight"] = torch.zeros(2, 2)
    torch.save(state, weights)
    with pytest.raises(ModelUnavailableError, match="extra_head"):
        load_embedder(spec)


def test_weights_of_another_architecture_are_unavailable(tmp_path: Path) -> None:
    spec = build_tiny_checkpoint(tmp_path / "tiny")
    with pytest.raises(
        ModelUnavailableError, match="could not be loaded into open_clip ViT-S-32-alt"
    ):
        load_embedder(f"ViT-S-32-alt:{Path(spec) / BIN}")


def test_missing_weights_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        load_embedder(f"ViT-B-32:{tmp_path / 'missing.pt'}")


@pytest.mark.slow
def test_registry_architecture_with_local_weights(tmp_path: Path) -> None:
    import open_clip
    import torch

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-S-32-alt")
    torch.save(model.state_dict(), tmp_path / "a.pt")
    shutil.copy(tmp_path / "a.pt", tmp_path / "b.pt")
    a = load_embedder(f"ViT-S-32-alt:{tmp_path / 'a.pt'}")
    b = load_embedder(f"ViT-S-32-alt:{tmp_path / 'b.pt'}")
    assert a.model_id == b.model_id == f"open_clip:ViT-S-32-alt:{weights_digest(tmp_path / 'a.pt')}"
    assert isinstance(a, OpenClipEmbedder)
    images = _images(2)
    expected = (
        torch.nn.functional.normalize(model.eval().encode_image(a.preprocess(images)), dim=-1)
        .detach()
        .numpy()
    )
    np.testing.assert_allclose(a.embed(images), expected, atol=1e-5)
    np.testing.assert_allclose(b.embed(images), expected, atol=1e-5)
