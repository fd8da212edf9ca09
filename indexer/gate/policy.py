"""The gate policy: which tiers fail a CI run, how many flagged images are tolerated, thresholds.

A repository keeps its policy under version control in ``splitaudit.toml`` (keys at the top
level) or in ``pyproject.toml`` under ``[tool.splitaudit]``::

    fail_on = ["exact", "near"]      # or "exact,near"
    max_rate = 0.0                   # fraction of test images allowed to be flagged
    max_count = 0                    # number of test images allowed to be flagged
    max_unreadable = 0               # test images allowed to be unreadable (not audited); default 0
    max_unreadable_rate = 0.01       # or a fraction of them (either limit alone relaxes the default)
    baseline = "splitaudit.baseline.json"   # relative to the policy file
    [thresholds]                     # handed to the audit engine (Thresholds field names)
    semantic_cosine = 0.9            # aliases: semantic, phash / hamming (= phash_hamming)

Command-line flags override the file key by key (thresholds tier by tier).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.kinds import DEFAULT_FAIL_KINDS, MATCH_KINDS

logger = logging.getLogger(__name__)

TIERS: tuple[str, ...] = MATCH_KINDS
DEFAULT_FAIL_ON: tuple[str, ...] = DEFAULT_FAIL_KINDS
POLICY_FILE = "splitaudit.toml"
PYPROJECT = "pyproject.toml"
_KEYS = (
    "fail_on",
    "max_rate",
    "max_count",
    "max_unreadable",
    "max_unreadable_rate",
    "thresholds",
    "baseline",
)
# Short names for the engine's threshold fields (``splitaudit.indexer.match.thresholds.Thresholds``).
THRESHOLD_ALIASES = {
    "semantic": "semantic_cosine",
    "phash": "phash_hamming",
    "hamming": "phash_hamming",
}


@dataclass(frozen=True)
class Policy:
    """What makes the gate fail.

    The gate fails when more than ``max_count`` test images are flagged in a ``fail_on`` tier,
    or when the flagged fraction exceeds ``max_rate``. With neither set, ``max_rate`` is 0
    (any flagged image fails); with only ``max_count`` set, only the count applies.

    Test images that could not be read were never audited: more than ``max_unreadable`` of
    them (or a larger fraction than ``max_unreadable_rate``) fail the gate too; with neither
    set, a single unreadable image fails it.
    """

    fail_on: tuple[str, ...] = DEFAULT_FAIL_ON
    max_rate: float | None = None
    max_count: int | None = None
    max_unreadable: int | None = None
    max_unreadable_rate: float | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    baseline: Path | None = None
    source: str | None = None  # the file the policy came from, for the summary

    def __post_init__(self) -> None:
        """Validate every field (``UsageError`` says which one is wrong)."""
        object.__setattr__(self, "fail_on", parse_tiers(self.fail_on))
        object.__setattr__(self, "max_rate", _check_rate(self.max_rate, "max rate"))
        object.__setattr__(self, "max_count", _check_count(self.max_count))
        object.__setattr__(
            self, "max_unreadable", _check_count(self.max_unreadable, "max unreadable")
        )
        object.__setattr__(
            self,
            "max_unreadable_rate",
            _check_rate(self.max_unreadable_rate, "max unreadable rate"),
        )
        object.__setattr__(
            self, "thresholds", {THRESHOLD_ALIASES.get(k, k): v for k, v in self.thresholds.items()}
        )

    @property
    def effective_max_rate(self) -> float | None:
        """The rate limit in force: the given one, else 0 unless a count limit is set."""
        if self.max_rate is None and self.max_count is None:
            return 0.0
        return self.max_rate

    @property
    def effective_max_unreadable(self) -> int | None:
        """The unreadable-count limit in force: the given one, else 0 unless a rate limit is set."""
        if self.max_unreadable is None and self.max_unreadable_rate is None:
            return 0
        return self.max_unreadable

    def with_overrides(
        self,
        *,
        fail_on: str | Iterable[str] | None = None,
        max_rate: float | None = None,
        max_count: int | None = None,
        thresholds: Mapping[str, float] | None = None,
        baseline: Path | None = None,
        max_unreadable: int | None = None,
        max_unreadable_rate: float | None = None,
    ) -> Policy:
        """A copy where every given (non-None) value replaces the file's; thresholds merge per tier."""
        changes: dict[str, Any] = {}
        if fail_on is not None:
            changes["fail_on"] = parse_tiers(fail_on)
        if max_rate is not None:
            changes["max_rate"] = max_rate
        if max_count is not None:
            changes["max_count"] = max_count
        if max_unreadable is not None:
            changes["max_unreadable"] = max_unreadable
        if max_unreadable_rate is not None:
            changes["max_unreadable_rate"] = max_unreadable_rate
        if thresholds:
            changes["thresholds"] = {
                **self.thresholds,
                **{THRESHOLD_ALIASES.get(k, k): v for k, v in thresholds.items()},
            }
        if baseline is not None:
            changes["baseline"] = baseline
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """One line naming the policy, e.g. ``fail on exact,near; max rate 0%``."""
        parts = [f"fail on {','.join(self.fail_on) or '(no tier)'}"]
        rate = self.effective_max_rate
        if rate is not None:
            parts.append(
                f"max rate {rate:.4g}" if rate == 0 else f"max rate {rate:.4g} ({rate:.2%})"
            )
        if self.max_count is not None:
            parts.append(f"max count {self.max_count}")
        if self.max_unreadable is not None:
            parts.append(f"max unreadable {self.max_unreadable}")
        if self.max_unreadable_rate is not None:
            parts.append(f"max unreadable rate {self.max_unreadable_rate:.4g}")
        if self.thresholds:
            parts.append(
                "thresholds " + ", ".join(f"{k}={v:g}" for k, v in sorted(self.thresholds.items()))
            )
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded in the gate section of the report)."""
        return {
            "fail_on": list(self.fail_on),
            "max_rate": self.effective_max_rate,
            "max_count": self.max_count,
            "max_unreadable": self.effective_max_unreadable,
            "max_unreadable_rate": self.max_unreadable_rate,
            "thresholds": dict(self.thresholds),
            "baseline": str(self.baseline) if self.baseline else None,
            "source": self.source,
        }


def parse_tiers(value: str | Iterable[str]) -> tuple[str, ...]:
    """``"exact,near"`` or ``["exact", "near"]`` -> ``("exact", "near")`` in canonical order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    tiers: set[str] = set()
    for raw in items:
        if not isinstance(raw, str):
            raise UsageError(
                f"fail-on tiers must be names, got {raw!r}; choose from {', '.join(TIERS)}"
            )
        name = raw.strip().lower().replace("-", "_")
        if not name:
            continue
        if name == "all":
            tiers.update(TIERS)
            continue
        if name not in TIERS:
            raise UsageError(
                f"unknown tier {raw.strip()!r} in fail-on; choose from {', '.join(TIERS)} (or all)"
            )
        tiers.add(name)
    return tuple(t for t in TIERS if t in tiers)


def parse_threshold_options(values: Iterable[str]) -> dict[str, float]:
    """``["phash_hamming=6", "semantic=0.9"]`` -> ``{"phash_hamming": 6, "semantic_cosine": 0.9}``."""
    out: dict[str, float] = {}
    for raw in values:
        name, sep, number = raw.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise UsageError(
                f"--threshold takes NAME=VALUE (e.g. semantic_cosine=0.9), got {raw!r}"
            )
        out[THRESHOLD_ALIASES.get(name, name)] = _threshold(number.strip(), f"--threshold {name}")
    return out


def _threshold(value: Any, what: str) -> float:
    """A threshold from CLI text or TOML: whole numbers stay ``int`` (bit counts and pixel sizes
    must be whole; ``Thresholds`` refuses ``6.0`` for them), anything else a finite float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("+-").isdigit():
        return int(value)
    return _number(value, what)


def _number(value: Any, what: str) -> float:
    """A finite number from a TOML value or CLI text."""
    if isinstance(value, bool):
        raise UsageError(f"{what} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise UsageError(f"{what} must be a finite number, got {value!r}")
    return number


def _check_rate(value: float | None, what: str = "max rate") -> float | None:
    """``None`` or a fraction in [0, 1]."""
    if value is None:
        return None
    rate = _number(value, what)
    if not 0.0 <= rate <= 1.0:
        raise UsageError(
            f"{what} is a fraction of test images between 0 and 1, got {value!r} (use 0.01 for 1%)"
        )
    return rate


def _check_count(value: int | None, what: str = "max count") -> int | None:
    """``None`` or a non-negative integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{what} must be a whole number >= 0, got {value!r}")
    return value


def find_policy_file(start_dir: Path) -> tuple[Path, bool] | None:
    """The nearest ``splitaudit.toml`` (or ``pyproject.toml`` with ``[tool.splitaudit]``) upward.

    Returns ``(path, is_pyproject)``. The search stops at the first folder holding ``.git``
    (the repository root) or at the filesystem root.
    """
    here = Path(start_dir).resolve()
    for folder in (here, *here.parents):
        candidate = folder / POLICY_FILE
        if candidate.is_file():
            return candidate, False
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and "splitaudit" in _read_toml(pyproject).get("tool", {}):
            return pyproject, True
        if (folder / ".git").exists():
            break
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; ``UsageError`` names the file and the syntax problem."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc}); fix the file or pass --policy") from exc
    except OSError as exc:
        raise UsageError(f"cannot read policy file {path}: {exc.strerror or exc}") from exc


def policy_from_mapping(
    data: Mapping[str, Any], *, source: str, base_dir: Path | None = None
) -> Policy:
    """Build a policy from a TOML table; unknown keys are refused (a typo must not relax the gate)."""
    table = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise UsageError(
            f"{source}: unknown policy key(s) {', '.join(unknown)}; known keys: {', '.join(_KEYS)}"
        )
    thresholds = table.get("thresholds", {})
    if not isinstance(thresholds, Mapping):
        raise UsageError(f"{source}: 'thresholds' must be a table of tier = number")
    baseline = table.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise UsageError(f"{source}: 'baseline' must be a file path string")
    max_count = table.get("max_count")
    try:
        return Policy(
            fail_on=table.get("fail_on", DEFAULT_FAIL_ON),
            max_rate=table.get("max_rate"),
            max_count=max_count,
            max_unreadable=table.get("max_unreadable"),
            max_unreadable_rate=table.get("max_unreadable_rate"),
            thresholds={str(k): _threshold(v, f"threshold {k}") for k, v in thresholds.items()},
            baseline=(base_dir / baseline if base_dir else Path(baseline)) if baseline else None,
            source=source,
        )
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from exc


def load_policy_file(path: Path) -> Policy:
    """Read the policy of one file (``splitaudit.toml``, or ``[tool.splitaudit]`` of a pyproject)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"policy file {path} does not exist")
    data = _read_toml(path)
    if path.name == PYPROJECT:
        data = data.get("tool", {}).get("splitaudit")
        if not isinstance(data, Mapping):
            raise UsageError(f"{path} has no [tool.splitaudit] table")
    return policy_from_mapping(data, source=str(path), base_dir=path.parent)


def load_policy(start_dir: Path | str = ".") -> Policy:
    """The policy of the nearest policy file above ``start_dir``, else the defaults."""
    found = find_policy_file(Path(start_dir))
    if found is None:
        return Policy()
    logger.info("policy from %s", found[0])
    return load_policy_file(found[0])
