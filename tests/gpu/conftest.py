"""GPU tests: skipped as a whole where no GPU, no kernel emulator and no emulated device is there.

`CUZK_TEST_KERNEL_MODULE=/path/to/file.py` runs the kernel-level tests against another
implementation of the `KernelModule` interface defined there as `EmuModule` (a host emulation of the
same CUDA sources, for working on machines without a GPU; tests/gpu/kernel_emulator.py).
`CUZK_EMULATED_GPUS=4GiB` (the emulated device, `cuzk.backends.cuda.emulated`) runs the tests of
`CudaBackend` (`needs_gpu`) there; those whose subject only a real GPU has skip saying why
(`needs_real_gpu`). The `unit_kernels` fixture gives any kernel unit's module (`EmuModule(unit)`
when emulating kernels), `kernels` the "curve" unit's.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuzk.backends.cuda import cuda_available, runtime

HERE = Path(__file__).parent
EMULATOR = os.environ.get("CUZK_TEST_KERNEL_MODULE")
EMULATED_DEVICE = runtime.emulated()
# Why the kernels are not the GPU's own (None: they are; with the emulated device alone they are its
# kernels). Where the kernel emulator is given too, the kernel-level tests take it.
REASON = cuda_available() if not EMULATED_DEVICE else ("kernels on the host emulator" if EMULATOR else None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if REASON is None or EMULATOR or EMULATED_DEVICE:
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
def device_units(needs_gpu: None) -> Callable[[str], Any]:
    """unit -> its `KernelModule` on the device (a GPU, or the emulated one): for code that uses streams
    and events, which the kernel emulator's `EmuModule` has not."""
    from cuzk.backends.cuda.module import get_module

    return functools.partial(get_module, 0)


@pytest.fixture(scope="session")
def kernels(unit_kernels: Callable[[str], Any]):
    return unit_kernels("curve")


@pytest.fixture
def launched(kernels, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the kernels launched on `kernels` during the test, in order (clear it to start over)."""
    names: list[str] = []
    launch = kernels.launch

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        names.append(name)
        return launch(name, *args, **kwargs)

    monkeypatch.setattr(kernels, "launch", spy)
    return names


@pytest.fixture(scope="session")
def needs_gpu(emulated: bool) -> None:
    """A `CudaBackend`: on a GPU, or on the emulated device."""
    if emulated and not EMULATED_DEVICE:
        pytest.skip("needs CudaBackend: a GPU, or the emulated device (CUZK_EMULATED_GPUS)")


@pytest.fixture
def needs_real_gpu() -> Callable[[str], None]:
    """Skips, saying `why`, on the emulated device: for tests whose subject it cannot have (timing,
    kernels running side by side)."""
    def check(why: str) -> None:
        if EMULATED_DEVICE:
            pytest.skip(f"needs a real GPU: {why}")
    return check
