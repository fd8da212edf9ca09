"""CPUs a run may use: affinity, a container's cgroup quota (v1 and v2), ``SPLITAUDIT_CPUS``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from splitaudit.indexer import cpus
from splitaudit.indexer.cli.main import cli
from splitaudit.indexer.cli.workers_option import resolve_workers
from splitaudit.indexer.errors import UsageError


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _proc(tmp_path: Path, text: str) -> Path:
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(text)
    return proc


def test_v2_quota_of_the_cgroup_and_its_ancestors(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    proc = _proc(tmp_path, "0::/kubepods/pod1/ctr\n")
    _tree(root, {"cgroup.controllers": "cpu", "cpu.max": "max 100000"})
    _tree(root, {"kubepods/pod1/ctr/cpu.max": "max 100000"})
    assert cpus.cgroup_cpus(proc, root) is None  # no quota anywhere
    _tree(root, {"kubepods/pod1/ctr/cpu.max": "150000 100000"})
    assert cpus.cgroup_cpus(proc, root) == 2  # 1.5 CPUs, rounded up
    _tree(root, {"kubepods/pod1/cpu.max": "50000 100000"})
    assert cpus.cgroup_cpus(proc, root) == 1  # the pod's own limit is smaller


def test_v2_in_a_container_reads_its_own_root(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    # a cgroup namespace ("0::/") or a host path the container does not see mounted
    _tree(root, {"cgroup.controllers": "cpu", "cpu.max": "400000 100000"})
    assert cpus.cgroup_cpus(_proc(tmp_path, "0::/\n"), root) == 4
    assert cpus.cgroup_cpus(_proc(tmp_path, "0::/docker/0123abcd\n"), root) == 4


def test_v1_cfs_quota(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    proc = _proc(tmp_path, "9:name=systemd:/\n4:memory:/job\n2:cpuacct:/\n1:cpu:/\n0::/\n")
    _tree(root, {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"})
    assert cpus.cgroup_cpus(proc, root) is None  # -1: no quota (and no v2 cpu.max)
    _tree(root, {"cpu/cpu.cfs_quota_us": "250000\n"})
    assert cpus.cgroup_cpus(proc, root) == 3
    # the cpu and cpuacct controllers mounted together, a container's own cgroup
    root2 = tmp_path / "cg2"
    proc2 = _proc(tmp_path, "3:cpu,cpuacct:/docker/abc\n")
    _tree(
        root2,
        {
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "200000",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        },
    )
    assert cpus.cgroup_cpus(proc2, root2) == 2


def test_no_cgroup_file_system_means_no_quota(tmp_path: Path) -> None:
    assert cpus.cgroup_cpus(tmp_path / "missing", tmp_path) is None
    proc = _proc(tmp_path, "0::/\n")
    assert cpus.cgroup_cpus(proc, tmp_path / "not-mounted") is None
    _tree(tmp_path / "odd", {"cpu.max": "garbage"})
    assert cpus.cgroup_cpus(proc, tmp_path / "odd") is None


def test_usable_cpus_is_the_smallest_unless_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cpus.ENV, raising=False)
    monkeypatch.setattr(cpus, "affinity_cpus", lambda: 64)
    monkeypatch.setattr(cpus, "_process_quota", lambda: 2)
    assert cpus.usable_cpus() == 2
    assert resolve_workers("auto") == 2  # --workers auto follows the quota
    monkeypatch.setattr(cpus, "_process_quota", lambda: None)
    assert cpus.usable_cpus() == 64
    monkeypatch.setenv(cpus.ENV, "3")
    assert cpus.usable_cpus() == 3
    assert resolve_workers("auto") == 3


@pytest.mark.parametrize("raw", ["two", "0", "-4", "1.5", "99999"])
def test_a_bad_setting_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(cpus.ENV, raw)
    with pytest.raises(UsageError, match="SPLITAUDIT_CPUS"):
        cpus.usable_cpus()
    result = CliRunner().invoke(cli, ["db", "--help"])
    assert result.exit_code == 2
    assert "SPLITAUDIT_CPUS" in result.output and "not a number of CPUs" in result.output


def _native_threads(env: dict[str, str]) -> list[str]:
    code = (
        "import os; from splitaudit.indexer.cpus import limit_native_threads\n"
        "import numpy\n"  # loaded before the limit: threadpoolctl sets it
        "applied = limit_native_threads()\n"
        "import faiss\n"  # loaded after: reads OMP_NUM_THREADS
        "from threadpoolctl import threadpool_info\n"
        "blas = {i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}\n"
        "print(applied, faiss.omp_get_max_threads(), sorted(blas))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return out.stdout.strip().split(maxsplit=2)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs to set fewer")
def test_native_pools_follow_the_limit() -> None:
    applied, omp, blas = _native_threads({cpus.ENV: "1"})
    assert (applied, omp, blas) == ("1", "1", "[1]")
    # a user's own OMP_NUM_THREADS wins: nothing is changed
    applied, omp, _blas = _native_threads({cpus.ENV: "1", "OMP_NUM_THREADS": "2"})
    assert (applied, omp) == ("None", "2")
    # no limit below the host's CPUs: nothing is changed
    applied, omp, _blas = _native_threads({})
    if cpus.cgroup_cpus() is None:
        assert applied == "None"
        assert int(omp) >= 2
