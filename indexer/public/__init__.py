"""splitaudit: did my test split leak into my pretraining corpus?

The Python API (docs/python.md)::

    import splitaudit
    splitaudit.index("data/corpus", corpus="mine", home=".splitaudit")
    result = splitaudit.audit("data/test", corpus="mine", home=".splitaudit")
    result.passed, result.summary, result.to_pandas()
    splitaudit.dedup(corpus="mine", home=".splitaudit").drop_keys
    with splitaudit.Client("https://splitaudit.example.org", token="...") as server:
        server.audit("data/test", corpus="mine")

This folder is installed as the ``splitaudit`` package itself (pyproject.toml maps it);
the library lives in ``splitaudit.indexer`` (the ``indexer/`` folder) and the service in
``splitaudit.app`` (the ``app/`` folder). Nothing heavy is imported here: the API's names
load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from splitaudit.indexer import __version__

if TYPE_CHECKING:
    from splitaudit.api import Client, audit, dedup, index
    from splitaudit.indexer.errors import SplitauditError
    from splitaudit.results import AuditResult, DedupResult

__all__ = [
    "AuditResult",
    "Client",
    "DedupResult",
    "SplitauditError",
    "__version__",
    "audit",
    "dedup",
    "index",
]

# public name -> module that defines it (imported on first access, PEP 562)
_LAZY = {
    "index": "splitaudit.api",
    "audit": "splitaudit.api",
    "dedup": "splitaudit.api",
    "Client": "splitaudit.api",
    "AuditResult": "splitaudit.results",
    "DedupResult": "splitaudit.results",
    "SplitauditError": "splitaudit.indexer.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'splitaudit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
