"""CuPy, or the emulated device's stand-in for it (`cuzk.backends.cuda.emulated`), for the modules
that drive the GPU: the emulated cards replace CUDA in a process whose environment names them
(`CUZK_EMULATED_GPUS`), and nothing else changes in the code that uses them.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

EMULATED_ENV = "CUZK_EMULATED_GPUS"


def emulated() -> bool:
    """Whether this process proves on emulated cards (checked without importing them)."""
    return bool(os.environ.get(EMULATED_ENV, "").strip())


def cupy() -> Any:
    if emulated():
        from cuzk.backends.cuda import emulated as emu

        return emu.cupy()
    import cupy

    return cupy


def cupyx() -> Any:
    if emulated():
        from cuzk.backends.cuda import emulated as emu

        return emu.cupyx()
    import cupyx

    return cupyx


def installed() -> bool:
    """Whether CuPy, or the emulation, is there to be used (found without importing CuPy)."""
    return emulated() or importlib.util.find_spec("cupy") is not None
