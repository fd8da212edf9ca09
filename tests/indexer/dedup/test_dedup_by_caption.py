"""``splitaudit dedup --by caption``: a folder with caption sidecars, indexed, clustered by caption."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import photo

from splitaudit.indexer.cli.main import cli

BUS = "A red double-decker bus crossing Westminster Bridge in heavy rain at dusk"
NETS = "A fisherman mending blue nets on a wooden pier beside three moored boats"
CAPTIONS = {
    "a.jpg": BUS,
    "b.jpg": "a RED double decker bus, crossing Westminster bridge in heavy rain at dusk!",  # exact
    "c.jpg": BUS.replace(" at dusk", " at dusk near the river"),  # near copy
    "d.jpg": NETS,
    "e.jpg": "Stock photo - " + NETS.replace("blue", "green"),  # near: one word swapped
    "f.jpg": "Image may contain: 1 person, outdoor",  # boilerplate: never clusters ...
    "g.jpg": "Image may contain: 1 person, outdoor",  # ... even with an identical copy
    "h.jpg": "stock photo",
    "i.jpg": "A quiet mountain village under fresh snow at sunrise with smoke rising",
}
SIZES = {"a.jpg": (200, 150), "b.jpg": (400, 300), "c.jpg": (320, 240), "d.jpg": (400, 300)}


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for n, (name, text) in enumerate(CAPTIONS.items()):
        photo(n, SIZES.get(name, (320, 240))).save(folder / name, quality=90)  # all different
        (folder / name).with_suffix(".txt").write_text(text, encoding="utf-8")
    return folder


def test_dedup_by_caption_writes_clusters_and_drop_list(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = CliRunner().invoke(
        cli, ["index", str(_corpus(tmp_path)), "--corpus", "web", "--home", str(home), "--no-embed"]
    )
    assert run.exit_code == 0, run.output
    out, drop = tmp_path / "clusters.json", tmp_path / "drop.txt"
    args = ["dedup", "--corpus", "web", "--home", str(home), "--by", "caption"]
    run = CliRunner().invoke(cli, [*args, "--json", str(out), "--drop-list", str(drop), "-q"])
    assert run.exit_code == 0, run.output
    assert "9 items: 2 duplicate clusters, 3 duplicates to drop" in run.output
    report = json.loads(out.read_text())
    assert report["by"] == "caption" and report["schema"] == "splitaudit.dedup/v1"
    assert report["thresholds"]["caption_jaccard"] == 0.6
    clusters = {frozenset(m["key"] for m in c["members"]): c for c in report["clusters"]}
    assert set(clusters) == {frozenset({"a.jpg", "b.jpg", "c.jpg"}), frozenset({"d.jpg", "e.jpg"})}
    bus = clusters[frozenset({"a.jpg", "b.jpg", "c.jpg"})]
    assert bus["kept"] == "b.jpg"  # --keep largest: the most pixels
    assert bus["tier"] == "caption"
    members = {m["key"]: m for m in bus["members"]}
    assert members["a.jpg"]["jaccard"] == 1.0 and members["a.jpg"]["partner_key"] == "b.jpg"
    assert 0.6 <= members["c.jpg"]["jaccard"] < 1.0
    assert members["c.jpg"]["caption"] == CAPTIONS["c.jpg"]
    assert report["summary"]["by_tier"] == {"caption": 3}
    assert report["summary"]["caption_pairs"]["exact"] >= 1
    dropped = drop.read_text().split()
    assert sorted(dropped) == ["a.jpg", "c.jpg", "e.jpg"]
    assert not {"f.jpg", "g.jpg", "h.jpg"} & set(dropped)  # boilerplate never clusters

    # --keep first, then the image dedup is unchanged by default (these photos are all different)
    run = CliRunner().invoke(cli, [*args, "--keep", "first", "--drop-list", str(drop), "-q"])
    assert run.exit_code == 0, run.output
    assert sorted(drop.read_text().split()) == ["b.jpg", "c.jpg", "e.jpg"]  # a and d kept
    run = CliRunner().invoke(cli, ["dedup", "--corpus", "web", "--home", str(home), "-q"])
    assert run.exit_code == 0, run.output
    assert "9 items: 0 duplicate clusters" in run.output


def test_dedup_by_caption_bad_options_are_usage_errors(tmp_path: Path) -> None:
    home = tmp_path / "home"
    run = CliRunner().invoke(
        cli, ["index", str(_corpus(tmp_path)), "--corpus", "web", "--home", str(home), "--no-embed"]
    )
    assert run.exit_code == 0, run.output
    base = ["dedup", "--corpus", "web", "--home", str(home), "--by", "caption", "-q"]
    run = CliRunner().invoke(cli, [*base, "--semantic"])
    assert run.exit_code != 0 and "--semantic" in run.output
    run = CliRunner().invoke(cli, [*base, "--threshold", "phash_hamming=6"])
    assert run.exit_code != 0 and "only caption_* thresholds" in run.output
    run = CliRunner().invoke(cli, [*base, "--threshold", "caption_jaccard=1.5"])
    assert run.exit_code != 0 and "caption_jaccard must be a number" in run.output
    # a stricter threshold: only the exact copy is left
    run = CliRunner().invoke(
        cli, [*base, "--threshold", "caption_jaccard=0.95", "--threshold", "caption_containment=1"]
    )
    assert run.exit_code == 0, run.output
    assert "1 duplicate clusters" in run.output
