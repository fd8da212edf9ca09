"""Server-side tests of every UI page: status codes, key elements and the counts they show."""

from __future__ import annotations

from pathlib import Path

from ui_support import EXTRA_NEAR, Seeded, new_home, parse, seed, ui_client


def _seeded(tmp_path: Path) -> tuple[Path, Seeded]:
    home = new_home(tmp_path)
    return home, seed(home, tmp_path / "files")


def test_audits_list_shows_status_counts_per_tier_and_progress(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        page = client.get("/ui")
        running_only = client.get("/ui", params={"status": "running"})
        root = client.get("/", follow_redirects=False)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    doc = parse(page.text)
    rows = {r.attrs["data-audit-id"]: r for r in doc.find_all("tr", data_audit_id=True)}
    assert set(rows) == {str(s.audit), str(s.running_audit)}
    done = rows[str(s.audit)]
    assert done.one(data_field="status").text == "done"
    assert {c.attrs["data-kind"]: c.text for c in done.find_all("td", data_kind=True)} == {
        "exact": "1",
        "near": str(1 + EXTRA_NEAR),
        "semantic": "1",
        "label_leak": "1",
        "caption": "—",  # a summary stored before the caption tier existed: not counted
    }
    assert done.one(data_field="flagged").text == str(2 + EXTRA_NEAR)
    assert "data-poll" not in done.attrs
    running = rows[str(s.running_audit)]
    assert running.attrs["data-poll"] == f"/api/v1/audits/{s.running_audit}"
    assert running.one("progress").attrs["value"] == "0.4"
    assert "read 4 split images" in running.text
    assert "pets-test" in done.text and "web" in done.text
    only = parse(running_only.text).find_all("tr", data_audit_id=True)
    assert [r.attrs["data-audit-id"] for r in only] == [str(s.running_audit)]
    assert root.status_code in (302, 307) and root.headers["location"] == "/ui"


def test_audit_summary_shows_counts_rates_charts_thresholds_model_and_index(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        page = client.get(f"/ui/audits/{s.audit}")
    assert page.status_code == 200
    doc = parse(page.text)
    assert doc.by_id("n-items").text == str(4 + EXTRA_NEAR)
    assert doc.by_id("contaminated-rate").text == "96.8%"
    tiers = {n.attrs["data-kind-count"]: n.text for n in doc.find_all(data_kind_count=True)}
    assert tiers == {
        "exact": "1",
        "near": str(1 + EXTRA_NEAR),
        "semantic": "1",
        "label_leak": "1",
        "caption": "—",  # stored before the caption tier existed: shown as not counted
    }
    assert doc.by_id("tier-near").attrs["href"] == f"/ui/audits/{s.audit}/matches?kind=near"
    chart = doc.by_id("label-chart")
    bars = {b.attrs["data-label"] for b in chart.find_all("rect", class_="bar-fill")}
    assert bars == {"bird", "cat", "dog"}
    assert len(doc.by_id("label-table").find_all("tr")) == 1 + 3
    hists = {h.attrs["data-hist"]: h for h in doc.find_all("svg", data_hist=True)}
    assert set(hists) == {"cosine", "Hamming distance (bits)"}
    cos_lines = {
        ln.attrs["data-threshold"] for ln in hists["cosine"].find_all("line", data_threshold=True)
    }
    assert cos_lines == {"semantic_cosine", "near_cosine", "candidate_cosine"}
    ham_lines = {
        ln.attrs["data-threshold"]
        for ln in hists["Hamming distance (bits)"].find_all("line", data_threshold=True)
    }
    assert ham_lines == {"phash_hamming", "candidate_hamming"}
    assert len(hists["Hamming distance (bits)"].find_all("g", class_="hist-bar")) >= 5
    assert "phash_hamming" in page.text and "candidate_cosine" in page.text
    assert doc.by_id("semantic-status").text.startswith("ok")
    index_row = doc.one("table", aria_labelledby="index-h").find_all("tr")[1]
    assert [c.text for c in index_row.find_all("td")][:3] == ["3", "4", "4"]
    dups = doc.by_id("split-dups").find_all("tr")
    assert len(dups) == 2 and "cat/1.jpg" in dups[1].text and "dog/1.jpg" in dups[1].text
    assert "bird/broken.jpg" in page.text and "truncated file" in page.text
    assert doc.by_id("reviewed-count").text == "1"
    hrefs = {a.attrs.get("href") for a in doc.find_all("a")}
    assert {
        f"/ui/audits/{s.audit}/export.csv",
        f"/ui/audits/{s.audit}/export.json",
        f"/api/v1/audits/{s.audit}/report?format=csv",
    } <= hrefs


def test_running_audit_summary_polls_and_skips_the_charts(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        page = client.get(f"/ui/audits/{s.running_audit}")
    doc = parse(page.text)
    status = doc.by_id("audit-status")
    assert status.attrs["data-poll"] == f"/api/v1/audits/{s.running_audit}"
    assert "data-reload-on-done" in status.attrs
    assert status.one("progress").attrs["value"] == "0.4"
    assert not doc.find_all("svg")


def test_review_queue_pages_and_filters(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    base = f"/ui/audits/{s.audit}/matches"
    with ui_client(home) as client:
        first = parse(client.get(base).text)
        second = parse(client.get(base, params={"page": 2}).text)
        cats = parse(client.get(base, params={"label": "cat"}).text)
        semantic = parse(client.get(base, params={"kind": "semantic"}).text)
        dup = parse(client.get(base, params={"review": "duplicate"}).text)
        unreviewed = parse(client.get(base, params={"review": "unreviewed", "page_size": 100}).text)
        bad = client.get(base, params={"kind": "blurry"})
        missing = client.get("/ui/audits/999/matches")
    rows = first.find_all("tr", data_match_id=True)
    assert len(rows) == 50 and first.one(data_total=True).text == str(s.pair_total)
    assert [r.attrs["data-pos"] for r in rows[:3]] == ["1", "2", "3"]
    assert rows[0].attrs["data-match-id"] == str(s.matches["exact"])
    assert "bob" in rows[0].one(data_field="verdict").text
    assert rows[0].attrs["data-href"] == f"/ui/audits/{s.audit}/review/1"
    assert len(second.find_all("tr", data_match_id=True)) == s.pair_total - 50
    cat_rows = cats.find_all("tr", data_match_id=True)
    assert {r.attrs["data-match-id"] for r in cat_rows} == {
        str(s.matches[k]) for k in ("exact", "near", "leak")
    }
    assert cat_rows[0].attrs["data-href"] == f"/ui/audits/{s.audit}/review/1?label=cat"
    assert [r.attrs["data-match-id"] for r in semantic.find_all("tr", data_match_id=True)] == [
        str(s.matches["semantic"])
    ]
    assert [r.attrs["data-match-id"] for r in dup.find_all("tr", data_match_id=True)] == [
        str(s.matches["exact"])
    ]
    assert len(unreviewed.find_all("tr", data_match_id=True)) == s.pair_total - 1
    assert (
        bad.status_code == 400
        and "unknown match kind" in bad.text
        and bad.headers["content-type"].startswith("text/html")
    )
    assert missing.status_code == 404 and "audit 999 does not exist" in missing.text
    label_options = [o.attrs["value"] for o in first.by_id("f-label").find_all("option")]
    assert label_options == ["", "bird", "cat", "dog"]


def test_pair_view_shows_both_images_scores_provenance_and_history(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        first = client.get(f"/ui/audits/{s.audit}/review/1")
        second = parse(client.get(f"/ui/audits/{s.audit}/review/2").text)
    assert first.status_code == 200
    doc = parse(first.text)
    body = doc.one("body")
    assert body.attrs["data-match-id"] == str(s.matches["exact"])
    assert body.attrs["data-next-url"] == f"/ui/audits/{s.audit}/review/2"
    assert "data-prev-url" not in body.attrs
    imgs = [i.attrs for i in doc.find_all("img", class_="thumb")]
    assert imgs[0]["src"] == f"/api/v1/split-items/{s.split_items['cat']}/thumbnail?size=640"
    assert imgs[1]["src"] == f"/api/v1/items/{s.items['exact']}/thumbnail?size=640"
    assert all(i["alt"] for i in imgs) and imgs[0]["data-pixel"] == "ef" * 32
    current = doc.by_id("current-verdict")
    assert "duplicate" in current.text and "bob" in current.text and "same photo" in current.text
    pressed = [
        b.attrs["data-verdict"]
        for b in doc.find_all("button", data_verdict=True)
        if b.attrs["aria-pressed"] == "true"
    ]
    assert pressed == ["duplicate"]
    assert "alice" in doc.one("details", class_="history").text
    prov = doc.by_id("corpus-provenance")
    link = prov.one("a", href="https://example.org/img/000001.jpg")
    assert "noopener" in link.attrs["rel"]
    assert "CC-BY-4.0" in prov.text and "00000" in prov.text and "a cat on a mat" in prov.text
    assert doc.by_id("hamming").text.startswith("0")
    assert second.one("body").attrs["data-prev-url"] == f"/ui/audits/{s.audit}/review/1"
    assert "after mirroring" in second.by_id("visual-evidence").text
    assert "shape descriptor cosine 0.91" in second.by_id("shape-cosine-evidence").text
    assert "shape_cosine" not in second.by_id("visual-evidence").text  # not as a raw key


def test_label_leak_evidence_is_highlighted_and_escaped(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        page = client.get(f"/ui/matches/{s.matches['leak']}")
    assert page.status_code == 200
    assert "<b>on</b>" not in page.text and "&lt;b&gt;on&lt;/b&gt;" in page.text
    doc = parse(page.text)
    evidence = doc.by_id("leak-evidence")
    assert [m.text for m in evidence.find_all("mark")] == ["cat"]
    assert "caption" in evidence.text and "near" in evidence.text
    caption_marks = doc.by_id("corpus-provenance").find_all("mark")
    assert [m.text for m in caption_marks] == ["cat"]
    siblings = doc.one("ul", class_="siblings").find_all("a")
    assert {a.attrs["href"] for a in siblings} == {
        f"/ui/matches/{s.matches['exact']}",
        f"/ui/matches/{s.matches['near']}",
    }


def test_verdict_recorded_through_the_api_shows_on_the_pages(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        put = client.put(
            f"/api/v1/matches/{s.matches['semantic']}/review",
            json={"verdict": "not_duplicate", "note": "different dog"},
        )
        pair = parse(client.get(f"/ui/matches/{s.matches['semantic']}").text)
        queue = parse(
            client.get(f"/ui/audits/{s.audit}/matches", params={"review": "not_duplicate"}).text
        )
        summary = parse(client.get(f"/ui/audits/{s.audit}").text)
    assert put.status_code == 200
    current = pair.by_id("current-verdict")
    assert (
        "not duplicate" in current.text
        and "anonymous" in current.text
        and "different dog" in current.text
    )
    assert current.one("time").attrs["datetime"] == put.json()["at"]
    assert [r.attrs["data-match-id"] for r in queue.find_all("tr", data_match_id=True)] == [
        str(s.matches["semantic"])
    ]
    assert summary.by_id("reviewed-count").text == "2"


def test_pair_past_the_end_and_unknown_match(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    with ui_client(home) as client:
        end = client.get(f"/ui/audits/{s.audit}/review/{s.pair_total + 1}")
        empty = client.get(f"/ui/audits/{s.audit}/review/1", params={"review": "unsure"})
        unknown = client.get("/ui/matches/99999")
    assert (
        end.status_code == 200
        and f"holds {s.pair_total} pairs" in parse(end.text).by_id("queue-end").text
    )
    assert "nothing to review" in parse(empty.text).by_id("queue-end").text
    assert unknown.status_code == 404 and "match 99999 does not exist" in unknown.text


def test_self_leak_pair_has_no_corpus_image(tmp_path: Path) -> None:
    home, s = _seeded(tmp_path)
    from splitaudit.indexer.db.engine import transaction
    from splitaudit.indexer.db.models import Match
    from splitaudit.indexer.workspace import Workspace

    ws = Workspace.open(home, migrate=False)
    with transaction(ws.sessions) as session:
        row = Match(
            audit_id=s.audit,
            split_item_id=s.split_items["bird"],
            item_id=None,
            corpus=None,
            kind="label_leak",
            evidence={
                "type": "self",
                "hit_count": 1,
                "hits": [
                    {
                        "field": "filename",
                        "term": "bird",
                        "label": "bird",
                        "start": 0,
                        "end": 4,
                        "before": "",
                        "match": "bird",
                        "after": "_001.jpg",
                    }
                ],
            },
        )
        session.add(row)
        session.flush()
        match_id = row.id
    ws.close()
    with ui_client(home) as client:
        doc = parse(client.get(f"/ui/matches/{match_id}").text)
    assert len(doc.find_all("img", class_="thumb")) == 1
    assert "own" in doc.by_id("leak-evidence").text
    assert [m.text for m in doc.by_id("leak-evidence").find_all("mark")] == ["bird"]
    assert not doc.find_all(data_mode_btn=True)


def test_corpus_pages_show_counts_model_index_and_failed_items(tmp_path: Path) -> None:
    home, _s = _seeded(tmp_path)
    with ui_client(home) as client:
        listing = parse(client.get("/ui/corpora").text)
        detail = client.get("/ui/corpora/web")
        missing = client.get("/ui/corpora/nope")
    row = listing.one("tr", data_corpus="web")
    assert row.one(data_field="items").text == "4" and "tiny-model" in row.text
    doc = parse(detail.text)
    assert doc.by_id("corpus-items").text == "4" and doc.by_id("corpus-failed").text == "1"
    failed = doc.by_id("failed-items").find_all("tr")
    assert (
        len(failed) == 2 and "broken.jpg" in failed[1].text and "truncated JPEG" in failed[1].text
    )
    assert "not saved yet" in doc.by_id("index-info").text
    assert "/m.pt" in detail.text
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")


def test_upload_form_lists_corpora_and_thresholds(tmp_path: Path) -> None:
    home, _s = _seeded(tmp_path)
    with ui_client(home) as client:
        doc = parse(client.get("/ui/audits/new").text)
    form = doc.by_id("upload-form")
    assert form.one("input", type="file", name="split").attrs["accept"].startswith(".zip")
    corpora = form.find_all("input", name="corpus")
    assert [c.attrs["value"] for c in corpora] == ["web"] and "checked" in corpora[0].attrs
    thresholds = {i.attrs["data-threshold"] for i in form.find_all("input", data_threshold=True)}
    assert {"phash_hamming", "near_cosine", "semantic_cosine"} <= thresholds
    for field in form.find_all("input"):
        if field.attrs.get("type") != "checkbox":
            assert form.find_all("label", for_=field.attrs["id"]), field.attrs


def test_static_files_are_served_with_caching_and_nothing_else(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    with ui_client(home) as client:
        page = parse(client.get("/ui").text)
        css_url, tiers_url = [
            link.attrs["href"] for link in page.find_all("link", rel="stylesheet")
        ]
        css = client.get(css_url)
        tiers = client.get(tiers_url)
        js = client.get("/ui/static/app.js")
        escape = client.get("/ui/static/..%2F..%2Fmain.py")
        unknown = client.get("/ui/static/nope.js")
        other = client.get("/ui/does/not/exist")
    assert css_url.startswith("/ui/static/app.css?v=")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "max-age" in css.headers["cache-control"]
    # the tiers' colours come from the tier registry, after app.css so they win over its defaults
    assert tiers_url == "/ui/tiers.css" and tiers.headers["content-type"].startswith("text/css")
    assert ".kind-label_leak{background:var(--label_leak)}" in tiers.text
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert escape.status_code == 404 and unknown.status_code == 404
    assert other.status_code == 404 and "there is no page" in other.text


def test_pages_are_empty_but_helpful_without_data(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    with ui_client(home) as client:
        audits = client.get("/ui")
        corpora = client.get("/ui/corpora")
        upload = client.get("/ui/audits/new")
    assert audits.status_code == 200 and "No audits" in audits.text
    assert "No corpus indexed yet" in corpora.text
    assert "no corpus to audit against" in upload.text and "upload-form" not in upload.text
