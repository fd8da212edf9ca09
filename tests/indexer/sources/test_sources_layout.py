"""Shared source rules: ImageFolder detection, label lookup, JSON-safe metadata, text cells."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import numpy as np

from splitaudit.indexer.sources._layout import (
    LayoutScan,
    is_hidden,
    is_image_name,
    json_safe,
    lookup_label,
    text_value,
)


def scan(*paths: str) -> LayoutScan:
    result = LayoutScan()
    for p in paths:
        result.add(p)
    return result


def test_imagefolder_rule() -> None:
    assert scan("cat/a.jpg", "dog/b.jpg").is_imagefolder
    assert not scan("cat/a.jpg", "cat/b.jpg").is_imagefolder  # one folder is a container
    assert not scan("cat/a.jpg", "dog/x/b.jpg").is_imagefolder
    assert not scan("a.jpg", "dog/b.jpg").is_imagefolder
    assert not scan().is_imagefolder


def test_names() -> None:
    assert is_image_name("x/Y.TIFF") and is_image_name("a.webp") and not is_image_name("a.txt")
    assert is_hidden("a/.git/x.jpg") and is_hidden("__MACOSX/a.jpg") and not is_hidden("a/b.jpg")


def test_lookup_label_order() -> None:
    labels = {"cat/a.jpg": "exact", "b.jpg": "name", "c": "stem"}
    assert lookup_label(labels, "cat/a.jpg") == "exact"
    assert lookup_label(labels, "x/b.jpg") == "name"
    assert lookup_label(labels, "y/c.png") == "stem"
    assert lookup_label(labels, "d.png") is None


def test_json_safe_converts_everything_to_json() -> None:
    value = {
        "nan": float("nan"),
        "np": np.float32(1.5),
        "arr": np.arange(3),
        "dec": Decimal("2.5"),
        "when": datetime(2024, 1, 2, tzinfo=UTC),
        "bytes": b"\xff",
        "tuple": (1, "a"),
        1: None,
    }
    out = json_safe(value)
    assert out == {
        "nan": None,
        "np": 1.5,
        "arr": [0, 1, 2],
        "dec": 2.5,
        "when": "2024-01-02T00:00:00+00:00",
        "bytes": "base64:/w==",
        "tuple": [1, "a"],
        "1": None,
    }
    json.dumps(out, allow_nan=False)


def test_text_value() -> None:
    assert text_value(3.0) == "3" and text_value(float("nan")) is None
    assert text_value("  ") is None and text_value(" x ") == "x" and text_value(7) == "7"
