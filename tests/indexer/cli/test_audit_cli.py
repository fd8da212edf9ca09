"""``splitaudit audit`` / ``baseline`` end to end, in subprocesses: exit codes, reports, baselines, server mode."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from conftest import photo
from PIL import Image

from splitaudit.indexer.cli.main import cli

SPLITAUDIT = str(Path(sys.executable).parent / "splitaudit")
CORPUS_SEEDS = range(6)
PLANTED_SEED = 3


def run(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``splitaudit`` console script."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "SPLITAUDIT_TORCH_THREADS": "1"}
    for inherited in (
        "GITHUB_STEP_SUMMARY",
        "SPLITAUDIT_HOME",
        "SPLITAUDIT_DATABASE_URL",
        "SPLITAUDIT_TOKEN",
    ):
        full_env.pop(inherited, None)
    full_env.update(env or {})
    return subprocess.run(
        [SPLITAUDIT, *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def planted_copy(seed: int) -> Image.Image:
    """A near-duplicate of corpus image ``seed``: downscaled (the caller re-encodes it as JPEG)."""
    return photo(seed).resize((256, 192), Image.Resampling.LANCZOS)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory that is its own repository root (no policy file found above it)."""
    (tmp_path / ".git").mkdir()
    return tmp_path


@pytest.fixture
def indexed_home(workdir: Path) -> Path:
    """A home with corpus ``ref`` (6 PNG photos, hashes only) indexed through the CLI."""
    corpus = workdir / "corpus"
    corpus.mkdir()
    for seed in CORPUS_SEEDS:
        photo(seed).save(corpus / f"img{seed}.png")
    home = workdir / "home"
    done = run("index", corpus, "--corpus", "ref", "--home", home, "--no-embed", cwd=workdir)
    assert done.returncode == 0, done.stderr
    return home


def make_split(root: Path, *, planted: bool) -> Path:
    """Three unrelated test photos, plus (``planted``) a resized JPEG copy of a corpus image."""
    for cls, seed in (("cat", 100), ("dog", 101), ("cat", 102)):
        (root / cls).mkdir(parents=True, exist_ok=True)
        photo(seed).save(root / cls / f"t{seed}.png")
    if planted:
        planted_copy(PLANTED_SEED).save(root / "dog" / "leaked.jpg", quality=85)
    return root


@pytest.mark.slow
def test_clean_split_passes_planted_near_duplicate_fails_and_baseline_suppresses(
    workdir: Path, indexed_home: Path
) -> None:
    clean = run(
        "audit",
        make_split(workdir / "clean", planted=False),
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--junit",
        "clean.xml",
        cwd=workdir,
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Gate PASSED" in clean.stdout and "Audited 3 test images" in clean.stdout
    suite = ET.parse(workdir / "clean.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("3", "0")

    split = make_split(workdir / "leaky", planted=True)
    summary_file = workdir / "step-summary.md"
    summary_file.write_text("earlier step\n")
    leaky = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--junit",
        "leak.xml",
        "--markdown",
        "leak.md",
        "--json",
        "leak.json",
        "--csv",
        "leak.csv",
        cwd=workdir,
        env={"GITHUB_STEP_SUMMARY": str(summary_file)},
    )
    assert leaky.returncode == 1, leaky.stdout + leaky.stderr
    assert "Gate FAILED" in leaky.stdout and "1 of 4 readable test images flagged" in leaky.stdout
    assert "Traceback" not in leaky.stderr

    report = json.loads((workdir / "leak.json").read_text())
    assert report["schema"] == "splitaudit.report/v1"
    assert report["gate"]["flagged_keys"] == ["dog/leaked.jpg"]
    leaked = next(i for i in report["items"] if i["key"] == "dog/leaked.jpg")
    assert leaked["verdict"] in ("exact", "near") and leaked["gate_failed"] is True
    assert leaked["matches"][0]["corpus_key"] == f"img{PLANTED_SEED}.png"

    root = ET.parse(workdir / "leak.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "0")
    failed_cases = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed_cases] == ["dog/leaked.jpg"]
    assert f"ref:img{PLANTED_SEED}.png" in (failed_cases[0].find("failure").get("message") or "")  # type: ignore[union-attr]

    markdown = (workdir / "leak.md").read_text()
    assert "**Gate FAILED**" in markdown and "`dog/leaked.jpg`" in markdown
    assert summary_file.read_text() == "earlier step\n" + markdown + "\n"
    assert "dog/leaked.jpg" in (workdir / "leak.csv").read_text()

    # A reviewer decided it is not a duplicate: a baseline entry (plus one stale entry) suppresses it.
    entries = [
        {
            "test_sha256": leaked["sha256"],
            "corpus": "ref",
            "corpus_key": f"img{PLANTED_SEED}.png",
            "kind": "near",
            "note": "reviewed: different shot",
        },
        {
            "test_sha256": "0" * 64,
            "test_key": "gone.jpg",
            "corpus": "ref",
            "corpus_key": "img0.png",
            "kind": "near",
        },
    ]
    (workdir / "baseline.json").write_text(
        json.dumps({"schema": "splitaudit.baseline/v1", "entries": entries})
    )
    again = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--baseline",
        "baseline.json",
        "--json",
        "again.json",
        cwd=workdir,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 by baseline" in again.stdout
    assert "1 stale baseline entry" in again.stdout and "gone.jpg" in again.stdout
    gate = json.loads((workdir / "again.json").read_text())["gate"]
    assert [s["by"] for s in gate["suppressed"]] == ["baseline"]
    assert [e["test_key"] for e in gate["stale_baseline"]] == ["gone.jpg"]

    # The policy file can raise the tolerated rate instead.
    (workdir / "splitaudit.toml").write_text("max_rate = 0.25\n")
    tolerated = run("audit", split, "--corpus", "ref", "--home", indexed_home, cwd=workdir)
    assert tolerated.returncode == 0, tolerated.stdout + tolerated.stderr
    assert "max rate 0.25" in tolerated.stdout


@pytest.mark.slow
def test_label_leak_tier_fails_the_gate_when_asked(workdir: Path, indexed_home: Path) -> None:
    split = workdir / "flat"
    split.mkdir()
    photo(100).save(split / "tabby_cat_01.png")
    photo(101).save(split / "img_0002.png")
    (workdir / "labels.csv").write_text("key,label\ntabby_cat_01.png,cat\nimg_0002.png,dog\n")
    leak = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--labels",
        "labels.csv",
        "--fail-on",
        "label_leak",
        "--junit",
        "leak.xml",
        cwd=workdir,
    )
    assert leak.returncode == 1, leak.stdout + leak.stderr
    assert "label_leak 1*" in leak.stdout
    failures = [
        (c.get("name"), c.find("failure"))
        for c in ET.parse(workdir / "leak.xml").getroot().iter("testcase")
        if c.find("failure") is not None
    ]
    assert [name for name, _f in failures] == ["tabby_cat_01.png"]
    assert failures[0][1].get("type") == "label_leak"  # type: ignore[union-attr]
    assert "'cat' in filename" in (failures[0][1].get("message") or "")  # type: ignore[union-attr]

    tolerated = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--labels",
        "labels.csv",
        "--fail-on",
        "label_leak",
        "--max-count",
        "1",
        cwd=workdir,
    )
    assert tolerated.returncode == 0, tolerated.stdout + tolerated.stderr
    assert "max count 1" in tolerated.stdout


@pytest.mark.slow
def test_unknown_corpus_exits_2_and_a_skipped_failing_tier_exits_3(
    workdir: Path, indexed_home: Path
) -> None:
    split = make_split(workdir / "s", planted=False)
    unknown = run("audit", split, "--corpus", "nope", "--home", indexed_home, cwd=workdir)
    assert unknown.returncode == 2
    assert "nope" in unknown.stderr and "Traceback" not in unknown.stderr

    # The corpus has no embeddings: a policy failing on `semantic` cannot be honoured.
    skipped = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--home",
        indexed_home,
        "--fail-on",
        "exact,near,semantic",
        "--junit",
        "out.xml",
        cwd=workdir,
    )
    assert skipped.returncode == 3, skipped.stdout + skipped.stderr
    assert "Gate ERROR: the policy fails on the semantic tier but it was skipped" in skipped.stdout
    assert (workdir / "out.xml").is_file()  # reports are still written


def test_missing_index_and_unreachable_server_exit_3(workdir: Path) -> None:
    split = make_split(workdir / "s", planted=False)
    no_index = run("audit", split, "--corpus", "ref", "--home", workdir / "no-home", cwd=workdir)
    assert no_index.returncode == 3, no_index.stderr
    assert "no splitaudit index at" in no_index.stderr
    assert not (workdir / "no-home").exists()  # nothing created as a side effect

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nobody listens there
    down = run(
        "audit", split, "--corpus", "ref", "--server", f"http://127.0.0.1:{port}", cwd=workdir
    )
    assert down.returncode == 3, down.stderr
    assert f"cannot reach the splitaudit server at http://127.0.0.1:{port}" in down.stderr
    assert "Traceback" not in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1


def test_bad_arguments_exit_2_with_one_line(workdir: Path) -> None:
    split = make_split(workdir / "s", planted=False)
    done = run("audit", split, "--corpus", "ref", "--fail-on", "exact,bogus", cwd=workdir)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unknown tier 'bogus' in fail-on; choose from exact, near, semantic, "
        "label_leak, caption (or all)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-rate", "2"], "max rate is a fraction"),
        (["--max-rate", "lots"], "--max-rate takes a fraction"),
        (["--threshold", "semantic"], "NAME=VALUE"),
        (["--threshold", "near=3"], "unknown threshold"),
        (["--baseline", "missing.json"], "baseline file missing.json does not exist"),
        (["--labels", "missing.csv"], "missing.csv does not exist"),
        (["--server", "http://127.0.0.1:9", "--home", "h"], "either --home"),
        (["--server", "ftp://x"], "http(s) URL"),
        (["--policy", "nope.toml"], "policy file nope.toml does not exist"),
    ],
)
def test_bad_arguments_in_process(
    workdir: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    make_split(workdir / "s", planted=False)
    result = CliRunner().invoke(cli, ["audit", "s", "--corpus", "ref", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_click_usage_errors_exit_2(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(workdir)
    assert CliRunner().invoke(cli, ["audit", "s"]).exit_code == 2  # --corpus missing
    assert (
        CliRunner().invoke(cli, ["audit", "s", "--corpus", "x", "--max-count", "-1"]).exit_code == 2
    )


def test_commands_have_help() -> None:
    for args in (
        ["audit", "--help"],
        ["baseline", "--help"],
        ["baseline", "export", "--help"],
        ["baseline", "prune", "--help"],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0 and "Usage:" in result.output


def test_baseline_export_and_prune_from_report(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    review = {"verdict": "not_duplicate", "note": "logo", "reviewer": "ann", "at": None}
    report = {
        "schema": "splitaudit.report/v1",
        "audit_id": 9,
        "summary": {"items": 1},
        "items": [
            {
                "key": "a.jpg",
                "sha256": "s" * 64,
                "pixel_digest": None,
                "matches": [
                    {
                        "id": 1,
                        "kind": "near",
                        "corpus": "ref",
                        "corpus_key": "img1.png",
                        "review": review,
                    },
                    {
                        "id": 2,
                        "kind": "near",
                        "corpus": "ref",
                        "corpus_key": "img2.png",
                        "review": None,
                    },
                ],
            }
        ],
        "failed": [],
    }
    Path("r.json").write_text(json.dumps(report))
    result = CliRunner().invoke(
        cli, ["baseline", "export", "--from-report", "r.json", "-o", "b.json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(Path("b.json").read_text())
    assert [(e["corpus_key"], e["note"]) for e in doc["entries"]] == [("img1.png", "logo")]
    assert doc["origin"]["audit_id"] == 9

    report["items"][0]["sha256"] = "t" * 64  # the reviewed image is gone: its entry is stale now
    Path("r2.json").write_text(json.dumps(report))
    pruned = CliRunner().invoke(cli, ["baseline", "prune", "b.json", "--report", "r2.json"])
    assert pruned.exit_code == 0 and "removed 1 stale entry" in pruned.output
    assert json.loads(Path("b.json").read_text())["entries"] == []

    both = CliRunner().invoke(
        cli, ["baseline", "export", "3", "--from-report", "r.json", "-o", "x.json"]
    )
    assert both.exit_code == 2 and "either AUDIT_ID or --from-report" in both.output


# ---------------------------------------------------------------- server mode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(workdir: Path, indexed_home: Path) -> Iterator[str]:
    """``splitaudit serve`` on the indexed home, on a free port; yields its URL."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("SPLITAUDIT_API_TOKENS", None)
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen(
        [SPLITAUDIT, "serve", "--home", str(indexed_home), "--port", str(port)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("server did not start:\n" + (workdir / "serve.log").read_text()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def review_not_duplicate(server: str, report: dict[str, Any], key: str) -> dict[str, Any]:
    """PUT a ``not_duplicate`` verdict on every match of test item ``key``; returns the item."""
    item = next(i for i in report["items"] if i["key"] == key)
    for m in item["matches"]:
        put = httpx.put(
            f"{server}/api/v1/matches/{m['id']}/review",
            json={"verdict": "not_duplicate", "note": "different shot"},
            timeout=10,
        )
        assert put.status_code == 200, put.text
    return item


@pytest.mark.slow
def test_server_mode_gate_review_and_baseline(workdir: Path, server: str) -> None:
    split = make_split(workdir / "leaky", planted=True)
    first = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--server",
        server,
        "--json",
        "first.json",
        "--junit",
        "first.xml",
        "--html",
        "first.html",
        cwd=workdir,
    )
    assert first.returncode == 1, first.stdout + first.stderr
    report: dict[str, Any] = json.loads((workdir / "first.json").read_text())
    assert isinstance(report["audit_id"], int)
    # The HTML report embeds the thumbnails the server serves (test side + corpus side of each pair).
    matches = [m for i in report["items"] for m in i["matches"]]
    page = (workdir / "first.html").read_text()
    assert page.count('<section class="pair') == len(matches) >= 1
    assert page.count('<img src="data:image/') == len(matches) + sum(
        m["corpus_item_id"] is not None for m in matches
    )
    assert report["gate"]["flagged_keys"] == ["dog/leaked.jpg"]
    root = ET.parse(workdir / "first.xml").getroot()
    assert [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None] == [
        "dog/leaked.jpg"
    ]

    leaked = review_not_duplicate(server, report, "dog/leaked.jpg")

    # The reviewed audit's verdicts become a baseline...
    exported = run(
        "baseline",
        "export",
        str(report["audit_id"]),
        "--server",
        server,
        "-o",
        "b.json",
        cwd=workdir,
    )
    assert exported.returncode == 0, exported.stderr
    entries = json.loads((workdir / "b.json").read_text())["entries"]
    assert {e["test_sha256"] for e in entries} == {leaked["sha256"]}
    assert {e["note"] for e in entries} == {"different shot"}

    # ...that lets a new audit of the same split pass offline-reviewed pairs.
    second = run(
        "audit",
        split,
        "--corpus",
        "ref",
        "--server",
        server,
        "--baseline",
        "b.json",
        "--json",
        "second.json",
        cwd=workdir,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    # The server carries the review over to the new audit, so the review suppresses it first
    # (offline baselines alone are covered by the local-mode test).
    assert "by review" in second.stdout or "by baseline" in second.stdout
    second_report = json.loads((workdir / "second.json").read_text())
    assert second_report["audit_id"] != report["audit_id"]
    assert second_report["gate"]["suppressed"]


@pytest.mark.slow
def test_server_mode_review_carries_over_to_the_next_gate_run(workdir: Path, server: str) -> None:
    split = make_split(workdir / "leaky", planted=True)
    first = run(
        "audit", split, "--corpus", "ref", "--server", server, "--json", "first.json", cwd=workdir
    )
    assert first.returncode == 1, first.stdout + first.stderr
    review_not_duplicate(server, json.loads((workdir / "first.json").read_text()), "dog/leaked.jpg")
    again = run("audit", split, "--corpus", "ref", "--server", server, cwd=workdir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "by review" in again.stdout
