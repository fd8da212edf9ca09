"""Policy: defaults, policy files (splitaudit.toml / pyproject.toml), precedence of CLI flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.gate.policy import (
    Policy,
    find_policy_file,
    load_policy,
    load_policy_file,
    parse_threshold_options,
    parse_tiers,
)


def test_defaults_fail_on_exact_and_near_with_zero_rate() -> None:
    p = Policy()
    assert p.fail_on == ("exact", "near")
    assert p.effective_max_rate == 0.0
    assert p.max_count is None


def test_count_alone_disables_the_default_rate() -> None:
    assert Policy(max_count=3).effective_max_rate is None
    assert Policy(max_count=3, max_rate=0.1).effective_max_rate == 0.1


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("near,exact", ("exact", "near")),
        (" semantic , label-leak ", ("semantic", "label_leak")),
        (["label_leak", "exact"], ("exact", "label_leak")),
        ("all", ("exact", "near", "semantic", "label_leak", "caption")),
        ("", ()),
    ],
)
def test_parse_tiers_canonical_order(given: str | list[str], expected: tuple[str, ...]) -> None:
    assert parse_tiers(given) == expected


def test_unknown_tier_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(
        UsageError, match=r"unknown tier 'nearr'.*exact, near, semantic, label_leak"
    ):
        parse_tiers("exact,nearr")


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "x"])
def test_bad_rate_is_refused(bad: object) -> None:
    with pytest.raises(UsageError):
        Policy(max_rate=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_count_is_refused(bad: object) -> None:
    with pytest.raises(UsageError, match="max count"):
        Policy(max_count=bad)  # type: ignore[arg-type]


def test_threshold_options() -> None:
    assert parse_threshold_options(["phash_hamming=6", "semantic = 0.9", "near-cosine=0.97"]) == {
        "phash_hamming": 6.0,
        "semantic_cosine": 0.9,
        "near_cosine": 0.97,
    }
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_threshold_options(["semantic"])
    with pytest.raises(UsageError, match="must be a number"):
        parse_threshold_options(["semantic=high"])


def test_no_policy_file_gives_defaults(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    assert load_policy(tmp_path) == Policy()


def test_splitaudit_toml_is_read(tmp_path: Path) -> None:
    (tmp_path / "splitaudit.toml").write_text(
        'fail_on = "exact,near,label_leak"\nmax_rate = 0.02\nmax_count = 5\n'
        'baseline = "ci/baseline.json"\n[thresholds]\nsemantic = 0.93\n'
    )
    p = load_policy(tmp_path)
    assert p.fail_on == ("exact", "near", "label_leak")
    assert (p.max_rate, p.max_count) == (0.02, 5)
    assert p.thresholds == {"semantic_cosine": 0.93}  # alias resolved
    assert p.baseline == tmp_path / "ci" / "baseline.json"
    assert p.source == str(tmp_path / "splitaudit.toml")


def test_pyproject_tool_table_is_read_and_hyphens_accepted(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.splitaudit]\nfail-on = ["exact"]\nmax-rate = 0.5\n'
    )
    p = load_policy(tmp_path)
    assert p.fail_on == ("exact",)
    assert p.max_rate == 0.5


def test_search_walks_up_to_the_repository_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    deep = repo / "data" / "test"
    deep.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "splitaudit.toml").write_text("max_count = 2\n")
    (tmp_path / "splitaudit.toml").write_text("max_count = 9\n")  # above the repo: ignored
    assert load_policy(deep).max_count == 2
    (repo / "splitaudit.toml").unlink()
    assert load_policy(deep) == Policy()


def test_splitaudit_toml_wins_over_pyproject_in_same_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.splitaudit]\nmax_count = 1\n")
    (tmp_path / "splitaudit.toml").write_text("max_count = 2\n")
    found = find_policy_file(tmp_path)
    assert found == (tmp_path / "splitaudit.toml", False)
    assert load_policy(tmp_path).max_count == 2


def test_pyproject_without_table_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / ".git").mkdir()
    assert find_policy_file(tmp_path) is None


def test_unknown_key_is_refused_so_a_typo_cannot_relax_the_gate(tmp_path: Path) -> None:
    (tmp_path / "splitaudit.toml").write_text("max_rat = 0.5\n")
    with pytest.raises(UsageError, match=r"splitaudit.toml: unknown policy key\(s\) max_rat"):
        load_policy(tmp_path)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "splitaudit.toml").write_text("max_rate = = 1\n")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_policy(tmp_path)


def test_bad_value_in_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "splitaudit.toml"
    path.write_text('fail_on = "exact,bogus"\n')
    with pytest.raises(UsageError, match=r"splitaudit.toml: unknown tier 'bogus'"):
        load_policy_file(path)


def test_explicit_pyproject_without_table_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n')
    with pytest.raises(UsageError, match=r"no \[tool.splitaudit\] table"):
        load_policy_file(path)


def test_cli_flags_override_the_file_key_by_key(tmp_path: Path) -> None:
    (tmp_path / "splitaudit.toml").write_text(
        'fail_on = ["exact"]\nmax_rate = 0.1\nmax_count = 4\n[thresholds]\nsemantic_cosine = 0.9\nphash_hamming = 6\n'
    )
    base = load_policy(tmp_path)
    p = base.with_overrides(
        fail_on="exact,near,semantic", max_rate=None, max_count=0, thresholds={"semantic": 0.95}
    )
    assert p.fail_on == ("exact", "near", "semantic")
    assert p.max_rate == 0.1  # not given on the command line: the file's value stays
    assert p.max_count == 0
    assert p.thresholds == {"semantic_cosine": 0.95, "phash_hamming": 6.0}
    assert p.source == base.source


def test_describe_and_to_dict() -> None:
    p = Policy(fail_on=("exact",), max_rate=0.05, max_count=3, thresholds={"semantic_cosine": 0.9})
    assert (
        p.describe()
        == "fail on exact; max rate 0.05 (5.00%); max count 3; thresholds semantic_cosine=0.9"
    )
    assert p.to_dict()["fail_on"] == ["exact"]
    assert Policy().to_dict()["max_rate"] == 0.0


def test_cli_threshold_integers_stay_integers_and_build_thresholds() -> None:
    from splitaudit.indexer.match.thresholds import Thresholds

    parsed = parse_threshold_options(["phash_hamming=6", "small_side=48", "semantic=0.75"])
    assert parsed == {"phash_hamming": 6, "small_side": 48, "semantic_cosine": 0.75}
    assert isinstance(parsed["phash_hamming"], int)
    th = Thresholds.from_mapping(parsed)
    assert (th.phash_hamming, th.small_side, th.semantic_cosine) == (6, 48, 0.75)


def test_policy_file_integer_thresholds_build_thresholds(tmp_path: Path) -> None:
    from splitaudit.indexer.match.thresholds import Thresholds

    (tmp_path / "splitaudit.toml").write_text("[thresholds]\nphash_hamming = 6\nsmall_side = 40\n")
    th = Thresholds.from_mapping(load_policy(tmp_path).thresholds)
    assert (th.phash_hamming, th.small_side) == (6, 40)
