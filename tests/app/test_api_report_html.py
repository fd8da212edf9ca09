"""``GET /audits/{id}/report?format=html``: one self-contained page with the pairs' thumbnails inline."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from apptest_support import api_client, new_home, seed_audit
from PIL import Image


def test_html_report_embeds_thumbnails_and_names_missing_sources(tmp_path: Path) -> None:
    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        response = client.get(f"/api/v1/audits/{seeded.audit}/report", params={"format": "html"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert (
        response.headers["content-disposition"] == f'inline; filename="audit-{seeded.audit}.html"'
    )
    page = response.text
    assert page.count('<section class="pair') == len(seeded.matches) == 3
    sources = re.findall(r'<img src="data:image/(jpeg|png);base64,([^"]+)"', page)
    # 3 pairs x 2 sides, less dog/1.png (gone) in both of its pairs: a reason is shown instead.
    assert len(sources) == 4
    assert max(Image.open(io.BytesIO(base64.b64decode(sources[0][1]))).size) <= 160
    assert (
        page.count("image not available: original bytes of split item") == 2 and "nope.png" in page
    )
    assert not re.search(r'(src|href)="(?!data:)', page)


def test_html_report_is_served_with_its_own_policy_so_its_styles_apply(tmp_path: Path) -> None:
    from splitaudit.indexer.reporting.html_report import PAGE_CSP

    home = new_home(tmp_path)
    seeded = seed_audit(home, tmp_path / "files")
    with api_client(home) as client:
        page = client.get(f"/api/v1/audits/{seeded.audit}/report", params={"format": "html"})
        as_json = client.get(f"/api/v1/audits/{seeded.audit}/report")
    policy = page.headers["content-security-policy"]
    assert policy == f"{PAGE_CSP}; frame-ancestors 'none'"
    assert "style-src 'unsafe-inline'" in policy and "script-src" not in policy
    assert "default-src 'none'" in policy  # nothing else may load: no scripts, no requests
    assert "style-src 'self'" in as_json.headers["content-security-policy"]  # the app's own
