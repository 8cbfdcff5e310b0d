"""GPU tests: skipped as a whole where `cuda_available()` gives a reason.

`CUZK_TEST_KERNEL_MODULE=/path/to/file.py` runs the kernel-level tests against another
implementation of the `KernelModule` interface defined there as `EmuModule` (a host emulation of the
same CUDA sources, for working on machines without a GPU; tests/gpu/kernel_emulator.py); the full-proof
tests still need a GPU. The `unit_kernels` fixture gives any kernel unit's module (`EmuModule(unit)`
when emulating), `kernels` the "curve" unit's.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuzk.backends.cuda import cuda_available

HERE = Path(__file__).parent
EMULATOR = os.environ.get("CUZK_TEST_KERNEL_MODULE")
REASON = cuda_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REASON is None or EMULATOR:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {REASON}")
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(skip)


def _load_emulator() -> Callable[[str], Any]:
    spec = importlib.util.spec_from_file_location("cuzk_kernel_emulator", EMULATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EmuModule


@pytest.fixture(scope="session")
def emulated() -> bool:
    return REASON is not None and bool(EMULATOR)


@pytest.fixture(scope="session")
def unit_kernels(emulated: bool) -> Callable[[str], Any]:
    """unit -> its kernel module: the emulator's `EmuModule(unit)` when emulating, else the GPU's; one per unit."""
    if emulated:
        return functools.cache(_load_emulator())
    from cuzk.backends.cuda.module import get_module

    return functools.partial(get_module, 0)


@pytest.fixture(scope="session")
def kernels(unit_kernels: Callable[[str], Any]):
    return unit_kernels("curve")


@pytest.fixture(scope="session")
def needs_gpu(emulated: bool) -> None:
    if emulated:
        pytest.skip("needs a real GPU (CudaBackend), not the kernel emulator")
