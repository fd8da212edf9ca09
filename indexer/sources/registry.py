"""The source-format registry: what a path is, and how it opens as a corpus source and as a split.

A format is one ``SourceFormat`` record, registered once (``register_source_format``):

- ``sniff(target)``: a cheap test of the path/URI (no decoding);
- ``open_corpus(target, options)`` / ``open_split(target, options)``: the source, or None to
  decline (the next format is tried); a format without one is not a corpus / not a split;
- ``split_location(target, options)``: the URI ``open_split`` re-reads (default: the resolved path);
- ``locator_kinds``: its ``LocatorKindSpec``s (how a locator of that kind is shown and read back;
  stored with ``Locator.to_dict`` / ``Locator.from_dict``);
- ``source_type`` + ``count_images``: a cheap image count for progress lines, for sources
  that do not say it themselves through ``count_hint()``.

``open_source``, ``open_split`` and ``split_location`` (``sources/open.py``) try the formats in
registration order; the built-in ones are registered by ``sources/builtin_formats.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.sources.record import LocatorKindSpec, Source, register_locator_kind

__all__ = [
    "OpenOptions",
    "SourceFormat",
    "Target",
    "cheap_image_count",
    "register_source_format",
    "source_formats",
]


@dataclass(frozen=True)
class Target:
    """The path or URI being opened, with cheap facts about it (computed on first use)."""

    spec: str | os.PathLike[str]

    @cached_property
    def path(self) -> Path:
        """``spec`` as a path, ``~`` expanded."""
        return Path(self.spec).expanduser()

    @cached_property
    def exists(self) -> bool:
        """True when the path exists."""
        return self.path.exists()

    @cached_property
    def is_dir(self) -> bool:
        """True for an existing folder."""
        return self.path.is_dir()

    @cached_property
    def is_file(self) -> bool:
        """True for an existing file."""
        return self.path.is_file()

    @cached_property
    def suffix(self) -> str:
        """The lower-cased file suffix (``.csv``)."""
        return self.path.suffix.lower()


@dataclass(frozen=True)
class OpenOptions:
    """What the caller of ``open_source`` / ``open_split`` asked for.

    ``allowed_roots`` are resolved folders (a split submitted over the API); ``workdir`` is the
    empty folder an archive or a single image is unpacked into.
    """

    image_column: str | None = None
    key_column: str | None = None
    workdir: str | os.PathLike[str] | None = None
    allowed_roots: list[str] | None = None
    max_bytes: int = 0
    max_members: int = 0


Opener = Callable[[Target, OpenOptions], Source | None]


@dataclass(frozen=True)
class SourceFormat:
    """One source format: how it is recognised, opened, located, stored and counted."""

    name: str
    sniff: Callable[[Target], bool]
    open_corpus: Opener | None = None
    open_split: Opener | None = None
    split_location: Callable[[Target, OpenOptions], str | None] | None = None
    locator_kinds: Sequence[LocatorKindSpec] = field(default_factory=tuple)
    source_type: type | None = None
    count_images: Callable[[Source], int | None] | None = None
    # False: its splits are not wrapped in ``RootedSource`` (their records name no user files).
    rooted: bool = True


_FORMATS: list[SourceFormat] = []


def register_source_format(fmt: SourceFormat, *, before: str | None = None) -> SourceFormat:
    """Register ``fmt`` (last, or just before the format named ``before``) and its locator kinds.

    Registering a name again replaces the earlier record in place. Returns ``fmt``.
    """
    for spec in fmt.locator_kinds:
        register_locator_kind(spec)
    names = [f.name for f in _FORMATS]
    if fmt.name in names:
        _FORMATS[names.index(fmt.name)] = fmt
        return fmt
    if before is None:
        _FORMATS.append(fmt)
        return fmt
    if before not in names:
        raise UsageError(
            f"cannot register source format {fmt.name!r} before {before!r}: no such format "
            f"(registered: {', '.join(names)})"
        )
    _FORMATS.insert(names.index(before), fmt)
    return fmt


def unregister_source_format(name: str) -> None:
    """Forget the format ``name`` (its locator kinds stay readable: stored rows may use them)."""
    _FORMATS[:] = [f for f in _FORMATS if f.name != name]


def source_formats() -> tuple[SourceFormat, ...]:
    """The registered formats, in the order they are tried (built-in ones first: the package's
    ``__init__`` imports ``builtin_formats``, which registers them, before any caller gets here)."""
    return tuple(_FORMATS)


def cheap_image_count(source: object) -> int | None:
    """The images ``source`` will yield when it can tell cheaply, else None.

    A source's own ``count_hint()`` first, else its format's ``count_images``.
    """
    hint = getattr(source, "count_hint", None)
    if callable(hint):
        n = hint()
        return None if n is None else int(n)
    for fmt in source_formats():
        if (
            fmt.count_images is not None
            and fmt.source_type is not None
            and isinstance(source, fmt.source_type)
        ):
            return fmt.count_images(source)  # type: ignore[arg-type]
    return None


def first_opened(
    target: Target, options: OpenOptions, *, split: bool
) -> tuple[SourceFormat, Source] | None:
    """The first format that recognises ``target`` and opens it (as a split or a corpus)."""
    for fmt in source_formats():
        opener = fmt.open_split if split else fmt.open_corpus
        if opener is None or not fmt.sniff(target):
            continue
        source = opener(target, options)
        if source is not None:
            return fmt, source
    return None


def first_location(target: Target, options: OpenOptions) -> str | None:
    """Where the first split format recognising ``target`` reads it from (see ``split_location``)."""
    for fmt in source_formats():
        if fmt.open_split is None or not fmt.sniff(target):
            continue
        if fmt.split_location is None:
            return str(target.path.resolve())
        found = fmt.split_location(target, options)
        if found is not None:
            return found
    return None
