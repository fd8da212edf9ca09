"""Ray, imported lazily, and the cluster a run works on: attached to an address or started here.

Every Ray run (indexing, dedup, audits) starts the same way; ``pip install 'splitaudit[ray]'``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from splitaudit.indexer.errors import UsageError


def import_ray() -> Any:
    """The ``ray`` module, or a ``UsageError`` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise UsageError(
            "--executor ray needs Ray: pip install 'splitaudit[ray]' (or use --executor local)"
        ) from exc
    return ray


@contextmanager
def ray_cluster(address: str | None, workers: int) -> Iterator[Any]:
    """Ray, attached to ``address`` (e.g. ``auto``) or a local instance of ``workers`` CPUs.

    An instance already initialised in this process is used as it is; one started here is
    shut down on exit.
    """
    ray = import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            **({} if address else {"num_cpus": max(workers, 1)}),
        )
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()
