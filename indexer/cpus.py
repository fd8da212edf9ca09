"""CPUs this process may use: its affinity mask, its cgroup's CPU quota, or ``SPLITAUDIT_CPUS``.

A container's CPU limit (``docker run --cpus 2``, ``deploy.resources.limits.cpus`` in Compose,
a Kubernetes ``resources.limits.cpu``) is a cgroup *quota*, not an affinity mask:
``os.sched_getaffinity`` still lists every CPU of the host, so a pool sized from it on a
64-core node limited to 2 CPUs runs 64 threads that the kernel throttles to 2 CPUs' worth of
time each period. ``usable_cpus`` is the smallest of the affinity mask and the quota (cgroup v2
``cpu.max`` or v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, of the process's cgroup and
every ancestor, rounded up), unless ``SPLITAUDIT_CPUS`` says how many to use. Every pool that
sizes itself (``--workers auto``, the dedup join's threads, the geometric tier's detection
threads, an exported model's inference threads) reads it; ``limit_native_threads`` passes it
on to the native libraries' own pools (OpenMP: FAISS and torch; BLAS), which size themselves
from the host's CPUs.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from pathlib import Path

from splitaudit.indexer.errors import UsageError

ENV = "SPLITAUDIT_CPUS"
MAX_CPUS = 4096
_PROC_CGROUP = Path("/proc/self/cgroup")
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_NATIVE_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cpus() -> int:
    """CPUs this process may use: ``SPLITAUDIT_CPUS`` when set, else the smallest of its
    affinity mask and its cgroup's CPU quota (``cgroup_cpus``)."""
    override = configured_cpus()
    if override is not None:
        return override
    cpus = affinity_cpus()
    quota = _process_quota()
    return cpus if quota is None else max(1, min(cpus, quota))


@functools.cache
def _process_quota() -> int | None:
    """``cgroup_cpus()`` read once per process (~120 us a read; pools ask per query batch)."""
    return cgroup_cpus()


def configured_cpus() -> int | None:
    """``SPLITAUDIT_CPUS`` as a count (None when unset or empty); a clear error otherwise."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        count = int(raw)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_CPUS:
        raise UsageError(
            f"{ENV}={raw!r} is not a number of CPUs in 1..{MAX_CPUS} "
            "(unset it to use what the affinity mask and the cgroup quota allow)"
        )
    return count


def affinity_cpus() -> int:
    """CPUs in this process's affinity mask (every CPU where the OS has no mask)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def cgroup_cpus(proc_cgroup: Path = _PROC_CGROUP, root: Path = _CGROUP_ROOT) -> int | None:
    """The CPU quota of this process's cgroup and its ancestors, in CPUs rounded up (the
    smallest where several set one); None where none does or nothing can be read (not Linux,
    no cgroup file system mounted)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas: list[float] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and not controllers:  # cgroup v2 (unified)
            base = root / "unified" if (root / "unified" / "cgroup.controllers").exists() else root
            quotas += _quotas(base, path, _v2_quota)
        elif "cpu" in controllers.split(","):  # cgroup v1, the cpu controller's hierarchy
            for name in (controllers, "cpu", "cpu,cpuacct"):
                if (root / name).is_dir():
                    quotas += _quotas(root / name, path, _v1_quota)
                    break
    return max(1, math.ceil(min(quotas))) if quotas else None


def _quotas(base: Path, path: str, read: Callable[[Path], float | None]) -> list[float]:
    """The quotas set along ``path`` under ``base``, from the cgroup up to ``base`` itself. In
    a container ``base`` is often the container's own cgroup already (a cgroup namespace, or
    only its subtree mounted), so a ``path`` not found under it is read at ``base`` alone."""
    here = base / path.lstrip("/")
    if not here.is_dir() or base not in (here, *here.parents):
        here = base
    found: list[float] = []
    while True:
        quota = read(here)
        if quota is not None:
            found.append(quota)
        if here == base:
            return found
        here = here.parent


def _v2_quota(folder: Path) -> float | None:
    """``cpu.max`` (``"<quota> <period>"``, ``"max <period>"`` for none) in CPUs."""
    try:
        quota, _, period = (folder / "cpu.max").read_text().strip().partition(" ")
        return None if quota == "max" else _ratio(quota, period or "100000")
    except OSError:
        return None


def _v1_quota(folder: Path) -> float | None:
    """``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (quota -1 for none) in CPUs."""
    try:
        quota = (folder / "cpu.cfs_quota_us").read_text().strip()
        period = (folder / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def limit_native_threads() -> int | None:
    """Pass ``usable_cpus`` on to the native thread pools when it is below the host's CPU
    count (a container's quota, ``SPLITAUDIT_CPUS``): ``OMP_NUM_THREADS`` for the OpenMP
    runtimes not loaded yet (FAISS's, torch's: they read it when they load) and
    ``threadpoolctl`` for the BLAS and OpenMP libraries loaded already. Nothing is changed
    where the user set one of those variables. Returns the limit applied (None: none)."""
    cpus = usable_cpus()
    if cpus >= (os.cpu_count() or 1) or any(os.environ.get(n) for n in _NATIVE_ENV):
        return None
    for name in _NATIVE_ENV:
        os.environ[name] = str(cpus)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=cpus)
    return cpus
