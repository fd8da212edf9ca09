"""Optional extras: a missing one is a UsageError (exit 2) that names the extra to install."""

from __future__ import annotations

import sys

import pytest

from splitaudit.indexer.db.engine import make_engine
from splitaudit.indexer.errors import UsageError
from splitaudit.indexer.extras import HF_MODULES, install_hint, missing, require_extra


def test_require_extra_passes_when_installed() -> None:
    require_extra("hf", {"json": "json"}, "reading JSON")  # importable: no error


def test_require_extra_names_the_extra_and_the_missing_distributions() -> None:
    wanted = {"json": "json", "no_such_module_xyz": "no-such-dist"}
    assert missing(wanted) == ["no-such-dist"]
    with pytest.raises(UsageError) as caught:
        require_extra("hf", wanted, "reading a Hugging Face dataset")
    text = str(caught.value)
    assert text.startswith("reading a Hugging Face dataset needs the 'hf' extra")
    assert "no-such-dist not installed" in text
    assert install_hint("hf") == "pip install 'splitaudit[hf]'"
    assert install_hint("hf") in text


def test_hf_sources_refuse_without_pyarrow(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from splitaudit.indexer.sources.hf_arrow import HFArrowSource

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setattr(
        "splitaudit.indexer.extras.importable", lambda module: module not in HF_MODULES
    )
    arrow = tmp_path / "data.arrow"
    arrow.write_bytes(b"x")
    with pytest.raises(UsageError, match=r"pip install 'splitaudit\[hf\]'"):
        HFArrowSource(arrow)


def test_postgres_url_without_its_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` fails
    with pytest.raises(UsageError) as caught:
        make_engine("postgresql+psycopg://127.0.0.1:5432/test")
    assert "pip install 'splitaudit[postgres]'" in str(caught.value)
    assert "psycopg not installed" in str(caught.value)
