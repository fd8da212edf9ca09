"""splitaudit: did my test split leak into my pretraining corpus?

This folder is installed as the ``splitaudit`` package itself (pyproject.toml maps it);
the library lives in ``splitaudit.indexer`` (the ``indexer/`` folder) and the service in
``splitaudit.app`` (the ``app/`` folder). Nothing heavy is imported here.
"""

from __future__ import annotations

from splitaudit.indexer import __version__

__all__ = ["__version__"]
