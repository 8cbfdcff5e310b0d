"""Kernel units load once per process and device, each under its own lock, so that a long compile
(the Poseidon unit's) does not hold up another unit's (`get_module`). Runs without a GPU: the
module class is replaced by one that records when each unit's compile runs."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cuzk.backends.base import ProverBackend
from cuzk.backends.cpu import CpuBackend
from cuzk.backends.cuda import module


def test_units_compile_side_by_side_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    poseidon_started, synthesis_done = threading.Event(), threading.Event()
    built: list[tuple[int, str]] = []

    class Compiling:
        def __init__(self, device_id: int, unit: str) -> None:
            built.append((device_id, unit))
            if unit == "poseidon":  # started first; finishes only once another unit compiled meanwhile
                poseidon_started.set()
                assert synthesis_done.wait(10), "the synthesis unit waited for the poseidon unit's lock"
            else:
                synthesis_done.set()

    monkeypatch.setattr(module, "KernelModule", Compiling)
    monkeypatch.setattr(module, "_MODULES", {})
    monkeypatch.setattr(module, "_UNIT_LOCKS", {})
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(module.get_module, 0, "poseidon")
        again = pool.submit(module.get_module, 0, "poseidon")
        assert poseidon_started.wait(10)
        other = pool.submit(module.get_module, 0, "synthesis")
        assert other.result(10) is module.get_module(0, "synthesis")
        assert first.result(10) is again.result(10)
    assert sorted(built) == [(0, "poseidon"), (0, "synthesis")]


def test_a_cpu_backend_has_no_kernels_to_prepare() -> None:
    assert ProverBackend.prepare_kernels is CpuBackend.prepare_kernels
    assert CpuBackend().prepare_kernels() == {}


def test_another_folder_of_kernel_sources_is_named_by_its_own_text(tmp_path) -> None:
    """`kernel_dir` (another revision's sources, built side by side for benchmarks): the same files give
    the package's digest and cubin name, one changed file a digest of its own."""
    import shutil

    from cuzk.backends.cuda import sources

    copy = tmp_path / "kernels"
    shutil.copytree(sources.KERNEL_DIR, copy)
    assert sources.kernel_source("curve", copy) == sources.kernel_source("curve")
    assert module.cubin_path("sm_90", tmp_path, "curve", copy) == module.cubin_path("sm_90", tmp_path, "curve")
    (copy / "msm.cu").write_text((copy / "msm.cu").read_text() + "\n// another revision\n")
    assert "// another revision" in sources.kernel_source("curve", copy)
    assert sources.source_digest("curve", copy) != sources.source_digest("curve")
    assert sources.source_digest("witness", copy) == sources.source_digest("witness")  # msm.cu is not its file
