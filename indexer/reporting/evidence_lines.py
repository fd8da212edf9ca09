"""A match's evidence as short readable lines (the HTML report; the review UI's pair view says the
same in its template): what agreed, by how much, and where.

Known keys get a sentence each; any other key (evidence a newer tier adds) is shown as
``key: value`` with nested values in compact JSON, so nothing the report holds is hidden.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Box = tuple[float, float, float, float]

_SENTENCES = (
    "sha256_equal",
    "pixel_digest_equal",
    "stream_digest_equal",
    "phash_hamming",
    "mirrored",
    "orientation",
    "cosine",
    "shape_cosine",
    "content_cosine",
    "verify_score",
    "verify_refused",
    "geometry",
    "near_rules",
    "min_side",
)


# geometry evidence keys with lines of their own (any other is shown as it is)
_GEOMETRY_KEYS = frozenset(
    {
        "box",
        "inliers",
        "mirrored",
        "scale",
        "angle",
        "inset",
        "test_box",
        "content",
        "perspective",
        "discarded",
    }
)


def _pct(value: Any) -> str:
    return f"{round(float(value) * 100)}%"


def _compact(value: Any) -> str:
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        return text if len(text) <= 160 else text[:157] + "..."
    return str(value)


def region_box(evidence: Any, *, on_test: bool) -> Box | None:
    """The matched region to draw, as fractions ``(x0, y0, x1, y1)`` of the image it lies on.

    On the corpus image: where the test image lies (a crop). On the test image: where the corpus
    image lies (an inset). ``None`` when the evidence holds no such box.
    """
    if not isinstance(evidence, Mapping):
        return None
    geometry = evidence.get("geometry")
    if not isinstance(geometry, Mapping):
        return None
    inset = bool(geometry.get("inset"))
    raw = geometry.get("test_box") if on_test else geometry.get("box")
    if (on_test and not inset) or (not on_test and inset):
        return None
    if not isinstance(raw, (list, tuple)) or len(raw) != 4:
        return None
    try:
        x0, y0, x1, y1 = (min(max(float(v), 0.0), 1.0) for v in raw)
    except (TypeError, ValueError):
        return None
    return (x0, y0, x1, y1) if x1 > x0 and y1 > y0 else None


def _geometry_lines(g: Mapping[str, Any]) -> list[str]:
    lines = []
    box = g.get("box")
    if isinstance(box, (list, tuple)) and len(box) == 4:
        mirrored = " after mirroring the test image" if g.get("mirrored") else ""
        where = (
            f"the test image covers {_pct(box[0])}-{_pct(box[2])} across and "
            f"{_pct(box[1])}-{_pct(box[3])} down the corpus image"
        )
        shape = []
        if g.get("scale") is not None:
            shape.append(f"side {_pct(g['scale'])} of it")
        if g.get("angle") is not None:
            shape.append(f"rotated {g['angle']} degrees")
        lines.append(
            f"geometric match: {g.get('inliers', '?')} keypoint matches agree on one "
            f"transform{mirrored}; {where}" + (f" ({', '.join(shape)})" if shape else "")
        )
    if g.get("inset") and g.get("test_box"):
        lines.append("the corpus image lies inside the test image (boxed on the test image)")
    if g.get("perspective"):
        lines.append(
            "seen in perspective (a photo of a screen or a print): the matches agree on one "
            "homography"
        )
    content = g.get("content")
    if isinstance(content, Mapping) and content.get("agreement") is not None:
        region = content.get("region")
        where = (
            f" (content region x {_pct(region[0])}-{_pct(region[2])}, "
            f"y {_pct(region[1])}-{_pct(region[3])} of the corpus image)"
            if isinstance(region, (list, tuple)) and len(region) == 4
            else ""
        )
        lines.append(
            f"content check: the aligned images agree in {_pct(content['agreement'])} of "
            f"{content.get('cells', '?')} textured cells{where}"
        )
    discarded = g.get("discarded")
    if isinstance(discarded, Mapping):
        lines.append(
            f"{discarded.get('inliers', '?')} keypoint matches discarded: "
            f"{discarded.get('reason', 'no reason given')}"
        )
    lines += [f"geometry {k}: {_compact(v)}" for k, v in g.items() if k not in _GEOMETRY_KEYS]
    return lines


def evidence_lines(evidence: Any) -> list[str]:
    """Readable lines for ``evidence`` (a match's evidence dict; anything else: one line)."""
    if not evidence:
        return []
    if not isinstance(evidence, Mapping):
        return [_compact(evidence)]
    ev = evidence
    lines = []
    if ev.get("sha256_equal"):
        lines.append("identical file bytes (SHA-256 equal)")
    if ev.get("pixel_digest_equal"):
        lines.append("identical decoded pixels")
    if ev.get("stream_digest_equal"):
        lines.append("identical JPEG image data (only metadata differs)")
    if ev.get("phash_hamming") is not None:
        turned = ev.get("orientation")
        how = (
            " after mirroring the test image"
            if ev.get("mirrored")
            else (
                f" after turning the test image ({turned})"
                if turned and turned != "identity"
                else ""
            )
        )
        lines.append(f"pHash differs in {ev['phash_hamming']} of 64 bits{how}")
    if ev.get("cosine") is not None:
        lines.append(f"embedding cosine {float(ev['cosine']):.3f}")
    if ev.get("shape_cosine") is not None:
        lines.append(
            f"thumbnail shape descriptor cosine {float(ev['shape_cosine']):.3f} "
            "(among the test image's nearest)"
        )
    if ev.get("content_cosine") is not None:
        lines.append(
            f"content region alone (away from the overlay): embedding cosine "
            f"{float(ev['content_cosine']):.3f}"
        )
    if ev.get("verify_score") is not None:
        lines.append(f"pixel verification score {float(ev['verify_score']):.3f}")
    refused = ev.get("verify_refused")
    if isinstance(refused, Mapping) and refused.get("verify_score") is not None:
        lines.append(
            f"pixel verification score {float(refused['verify_score']):.3f} not counted: compared "
            f"whole, {_pct(refused.get('whole_agreement', 0.0))} of the textured cells agree "
            "(a shared overlay: frame, window chrome, caption bands)"
        )
    if isinstance(ev.get("geometry"), Mapping):
        lines += _geometry_lines(ev["geometry"])
    if ev.get("near_rules"):
        rules = ev["near_rules"]
        lines.append(
            "near because of: "
            + (", ".join(map(str, rules)) if isinstance(rules, list) else str(rules))
        )
    if ev.get("min_side") is not None:
        lines.append(f"smaller image side {ev['min_side']} px")
    lines += [f"{k}: {_compact(v)}" for k, v in ev.items() if k not in _SENTENCES]
    return lines
