"""Tests for parsing model spec strings (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from splitaudit.indexer.embed.spec import DEFAULT_MODEL_SPEC, ModelSpec, parse_model_spec
from splitaudit.indexer.errors import UsageError


def test_default_spec_is_registry_vit_b_32() -> None:
    spec = parse_model_spec(DEFAULT_MODEL_SPEC)
    assert spec == ModelSpec(
        kind="registry", text=DEFAULT_MODEL_SPEC, arch="ViT-B-32", pretrained="laion2b_s34b_b79k"
    )


def test_registry_tag_is_canonicalised_like_open_clip() -> None:
    spec = parse_model_spec("ViT-B-32:LAION2B-s34b-b79k")
    assert (spec.kind, spec.arch, spec.pretrained) == ("registry", "ViT-B-32", "laion2b_s34b_b79k")


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("ViT-B-32:/models/clip/weights.pt", "/models/clip/weights.pt"),
        ("ViT-B-32:weights.safetensors", "weights.safetensors"),
        ("ViT-B-32:./ckpt/epoch_3.bin", "ckpt/epoch_3.bin"),
    ],
)
def test_arch_with_weights_path(text: str, path: str) -> None:
    spec = parse_model_spec(text)
    assert spec.kind == "weights"
    assert spec.arch == "ViT-B-32"
    assert spec.path == Path(path)
    assert spec.pretrained is None


def test_home_is_expanded_in_paths() -> None:
    spec = parse_model_spec("ViT-B-32:~/w.pt")
    assert spec.path == Path.home() / "w.pt"


def test_existing_directory_is_a_checkpoint_dir(tmp_path: Path) -> None:
    spec = parse_model_spec(str(tmp_path))
    assert (spec.kind, spec.path) == ("directory", tmp_path)


def test_path_like_directory_need_not_exist_yet(tmp_path: Path) -> None:
    spec = parse_model_spec(str(tmp_path / "missing"))
    assert (spec.kind, spec.path) == ("directory", tmp_path / "missing")


def test_local_dir_schema_is_accepted(tmp_path: Path) -> None:
    spec = parse_model_spec(f"local-dir:{tmp_path}")
    assert (spec.kind, spec.path) == ("directory", tmp_path)


@pytest.mark.parametrize("text", ["efficientnet-lite0", "EfficientNet-Lite0", "efficientnet_lite0"])
def test_bundled_encoder(text: str) -> None:
    spec = parse_model_spec(text)
    assert (spec.kind, spec.arch, spec.pretrained) == ("bundled", "efficientnet-lite0", "imagenet")


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("ViT-B-32", "random"),
        ("ViT-B-32:", "nothing after"),
        ("weights.pt", "architecture"),
        ("ViT B 32:tag", "architecture name"),
        ("ViT-B-32:bad tag!", "neither"),
        ("hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K", "local directory"),
        ("local-dir:", "no directory"),
    ],
)
def test_bad_specs_raise_usage_error(text: str, hint: str) -> None:
    with pytest.raises(UsageError, match=hint):
        parse_model_spec(text)


def test_model_spec_is_frozen() -> None:
    spec = parse_model_spec(DEFAULT_MODEL_SPEC)
    with pytest.raises(AttributeError):
        spec.arch = "RN50"  # type: ignore[misc]
