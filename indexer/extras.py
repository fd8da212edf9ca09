"""Optional extras of the light core install: which distributions each adds, and one clear error.

``pip install splitaudit`` is the light core (hashes, exact/near/label/caption tiers, dedup,
audits, the server, the gate client). Heavier or rarer dependencies come with extras
(pyproject.toml, docs/install.md):

- ``[embed]``: torch, OpenCLIP, the bundled encoder, the Hugging Face Hub client (weights);
- ``[hf]``: pyarrow and the Hugging Face Hub client, for Hugging Face datasets, Parquet
  manifests, clip-retrieval folders and ``.parquet`` outputs;
- ``[postgres]``: the psycopg driver, for a PostgreSQL database URL.

``require_extra`` turns a missing one into a ``UsageError`` (exit 2) that names the extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from splitaudit.indexer.errors import UsageError

# import name -> distribution
HF_MODULES = {"pyarrow": "pyarrow"}
HF_HUB_MODULES = {"pyarrow": "pyarrow", "huggingface_hub": "huggingface-hub"}
POSTGRES_MODULES = {"psycopg": "psycopg[binary]"}


def importable(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent missing, or a module blocked in sys.modules
        return False


def missing(modules: Mapping[str, str]) -> list[str]:
    """The distributions of ``modules`` (import name -> distribution) that cannot be imported."""
    return [dist for module, dist in modules.items() if not importable(module)]


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'splitaudit[{extra}]'"


def require_extra(extra: str, modules: Mapping[str, str], what: str) -> None:
    """Raise ``UsageError`` naming ``extra`` when any of ``modules`` is not installed.

    ``what`` is the thing that needs them, as the start of a sentence ("reading a Hugging Face
    dataset").
    """
    absent = missing(modules)
    if absent:
        raise UsageError(
            f"{what} needs the '{extra}' extra ({', '.join(absent)} not installed): "
            f"install it with `{install_hint(extra)}`"
        )
