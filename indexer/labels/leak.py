"""Label-leak checks on plain values: self-leak, match-leak and label-text prevalence.

Evidence context: each :class:`LeakEvidence` carries the matched text and up to
:data:`CONTEXT_CHARS` characters on each side as three separate strings (``before``,
``match``, ``after``; a side cut short starts/ends with ``…``), so a UI can escape and
highlight the match without parsing markers. ``context`` renders them as
``before[[match]]after`` for plain-text reports. ``start``/``end`` index the examined value of
the field: the key for ``filename``/``path``, the percent-decoded URL for ``url``.

Fields examined:

- key (a test item's path relative to its split, or a corpus item's key): hits in the last
  path component are ``filename``, hits before it ``path``. For self-leak, a directory named
  exactly like the label (an ImageFolder class folder) is how the split *gives* the label, not
  a leak, so hits overlapping it are ignored.
- ``url``: percent-escapes are decoded first (``tabby%20cat``); the scheme and host are not
  searched (a site name says what a site is about, not what one image shows, and would flag
  every image of the site), the path, query and fragment are. ``data:`` URLs are skipped.
- In keys and URLs, alphanumeric runs that look like random ids or hex digests (at least 8
  characters splitting into at least 4 tokens, 0.4+ tokens per character, e.g. ``dQw4w9WgXcQ``,
  ``3fa85f64...``) are not searched: case and digit splitting would find words in them by
  chance. ``n02123045``, ``TabbyCat`` and ``iPhone12Pro`` are searched as usual.
- EXIF/PNG text fields under the names the caller gives; manifest metadata and tags as
  ``metadata.<key>`` (nested: ``metadata.a.b``, lists ``metadata.a[0]``) or ``tags[i]``;
  only string values are searched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from urllib.parse import unquote

from splitaudit.indexer.labels.matcher import LabelHit, LabelMatcher
from splitaudit.indexer.labels.normalize import token_keys

__all__ = ["CONTEXT_CHARS", "LeakEvidence", "label_prevalence", "match_leak", "self_leak"]

CONTEXT_CHARS = 30
"""Characters of context kept on each side of a matched span."""

_URL_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
_ALNUM_RUN = re.compile(r"[^\W_]+")
_MAX_DEPTH = 8


@dataclass(frozen=True, slots=True)
class LeakEvidence:
    """One place where a label term appears: field, term, label, span and its context."""

    field: str
    term: str
    label: str
    start: int
    end: int
    before: str
    match: str
    after: str

    @property
    def context(self) -> str:
        """The context as plain text with the match marked: ``before[[match]]after``."""
        return f"{self.before}[[{self.match}]]{self.after}"

    def to_dict(self) -> dict[str, str | int]:
        """A JSON-ready dict (the dataclass fields plus ``context``)."""
        out: dict[str, str | int] = asdict(self)
        out["context"] = self.context
        return out


def _evidence(field: str, value: str, hit: LabelHit) -> LeakEvidence:
    lo = max(0, hit.start - CONTEXT_CHARS)
    hi = min(len(value), hit.end + CONTEXT_CHARS)
    before = ("…" if lo > 0 else "") + value[lo : hit.start]
    after = value[hit.end : hi] + ("…" if hi < len(value) else "")
    return LeakEvidence(
        field, hit.term, hit.label, hit.start, hit.end, before, value[hit.start : hit.end], after
    )


def _mask_opaque_ids(text: str) -> str:
    """Blank out (same length) alphanumeric runs that look like random ids or digests."""
    out = text
    for m in _ALNUM_RUN.finditer(text):
        run = m.group()
        if len(run) < 8:
            continue
        n_tokens = len(token_keys(run, plurals=False))
        if n_tokens >= 4 and n_tokens >= 0.4 * len(run):
            out = out[: m.start()] + " " * len(run) + out[m.end() :]
    return out


def _key_evidence(
    key: str, label: str, matcher: LabelMatcher, *, skip_label_dirs: bool
) -> list[LeakEvidence]:
    base = max(key.rfind("/"), key.rfind("\\")) + 1
    skip: list[tuple[int, int]] = []
    if skip_label_dirs:
        pos = 0
        for part in re.split(r"[/\\]", key[:base]):
            if part == label:
                skip.append((pos, pos + len(part)))
            pos += len(part) + 1
    out: list[LeakEvidence] = []
    for hit in matcher.find_label(_mask_opaque_ids(key), label):
        if any(hit.start < hi and lo < hit.end for lo, hi in skip):
            continue
        out.append(_evidence("filename" if hit.start >= base else "path", key, hit))
    return out


def _url_evidence(url: str, label: str, matcher: LabelMatcher) -> list[LeakEvidence]:
    if url[:5].lower() == "data:":
        return []
    m = _URL_AUTHORITY.match(url)
    authority = m.group() if m else ""
    decoded = authority + unquote(url[len(authority) :], errors="replace")
    searched = " " * len(authority) + _mask_opaque_ids(decoded[len(authority) :])
    return [_evidence("url", decoded, hit) for hit in matcher.find_label(searched, label)]


def _strings(prefix: str, value: object, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(field, string) for every string inside a JSON-like value."""
    if isinstance(value, str):
        yield prefix, value
    elif depth >= _MAX_DEPTH:
        return
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(f"{prefix}.{k}", v, depth + 1)
    elif isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes | bytearray):
        for i, v in enumerate(value):
            yield from _strings(f"{prefix}[{i}]", v, depth + 1)


def _text_evidence(
    fields: Iterable[tuple[str, str]], label: str, matcher: LabelMatcher
) -> list[LeakEvidence]:
    return [
        _evidence(field, value, hit)
        for field, value in fields
        if value and isinstance(value, str)  # e.g. undecoded EXIF bytes are skipped
        for hit in matcher.find_label(value, label)
    ]


def self_leak(
    *,
    key: str,
    label: str,
    matcher: LabelMatcher,
    text_fields: Mapping[str, str] | None = None,
    metadata: Mapping[str, object] | None = None,
    caption: str | None = None,
) -> list[LeakEvidence]:
    """Where a test item's own key, EXIF/PNG text, metadata or caption names its label.

    ``text_fields`` maps a field name (used verbatim as the evidence field, e.g.
    ``exif:ImageDescription``, ``png:Comment``) to its text; ``metadata`` is the manifest's
    extra columns (without the label column itself). Raises ``UsageError`` if ``label`` is not
    one of the matcher's labels.
    """
    out = _key_evidence(key, label, matcher, skip_label_dirs=True)
    out += _text_evidence((text_fields or {}).items(), label, matcher)
    out += _text_evidence(_strings("metadata", metadata or {}), label, matcher)
    if caption:
        out += _text_evidence([("caption", caption)], label, matcher)
    return out


def match_leak(
    *,
    label: str,
    matcher: LabelMatcher,
    caption: str | None = None,
    key: str | None = None,
    url: str | None = None,
    metadata_tags: Mapping[str, object] | Sequence[str] | None = None,
) -> list[LeakEvidence]:
    """Where a matched corpus item's caption, key, URL or tags name the test item's label.

    ``metadata_tags`` is either the item's metadata (fields ``metadata.<key>``) or a list of
    tags (fields ``tags[i]``).
    """
    out: list[LeakEvidence] = []
    if caption:
        out += _text_evidence([("caption", caption)], label, matcher)
    if key:
        out += _key_evidence(key, label, matcher, skip_label_dirs=False)
    if url:
        out += _url_evidence(url, label, matcher)
    if isinstance(metadata_tags, Mapping):
        out += _text_evidence(_strings("metadata", metadata_tags), label, matcher)
    elif metadata_tags is not None and not isinstance(metadata_tags, str):
        out += _text_evidence(
            ((f"tags[{i}]", t) for i, t in enumerate(metadata_tags) if isinstance(t, str)),
            label,
            matcher,
        )
    elif isinstance(metadata_tags, str):
        out += _text_evidence([("tags", metadata_tags)], label, matcher)
    return out


def label_prevalence(captions: Iterable[str | None], matcher: LabelMatcher) -> Counter[str]:
    """Per label, how many of ``captions`` mention it at least once (context, not a flag)."""
    counts: Counter[str] = Counter()
    for caption in captions:
        if caption:
            counts.update(matcher.mentions(caption))
    return counts
