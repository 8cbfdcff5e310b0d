"""CuPy, or the emulated device's stand-in for it (`cuzk.backends.cuda.emulated`), for the modules
that drive the GPU: the emulated cards replace CUDA in a process whose environment names them
(`CUZK_EMULATED_GPUS`), and nothing else changes in the code that uses them.
"""

from __future__ import annotations

import os
from typing import Any

EMULATED_ENV = "CUZK_EMULATED_GPUS"
#: Where the processes on the emulated cards publish what they hold (`emulated.device.ROOM_ENV`).
EMULATED_ROOM_ENV = "CUZK_EMULATED_GPU_ROOM"


def emulated() -> bool:
    """Whether this process proves on emulated cards (checked without importing them)."""
    return bool(os.environ.get(EMULATED_ENV, "").strip())


def get_cupy() -> Any:
    if emulated():
        import cuzk.backends.cuda.emulated as emu

        return emu.cupy()
    import cupy

    return cupy


def get_cupyx() -> Any:
    if emulated():
        import cuzk.backends.cuda.emulated as emu

        return emu.cupyx()
    import cupyx

    return cupyx

