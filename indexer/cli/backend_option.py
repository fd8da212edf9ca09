"""The ``--backend`` option shared by index / audit / serve / worker (env ``SPLITAUDIT_BACKEND``)."""

from __future__ import annotations

import click

from splitaudit.indexer.embed.backends import BACKEND_CHOICES, export_cache_dir

__all__ = ["backend_option", "export_cache_dir"]

backend_option = click.option(
    "--backend",
    type=click.Choice(BACKEND_CHOICES),
    envvar="SPLITAUDIT_BACKEND",
    default="auto",
    show_default=True,
    help="Inference backend for the embedding model: auto picks the fastest installed one for the "
    "device (OpenVINO, then ONNX Runtime, then torch on CPU). Exports are checked against eager "
    "torch and cached under HOME/exports (env SPLITAUDIT_BACKEND).",
)
