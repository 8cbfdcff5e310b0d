"""The CUDA backend: our own kernels (CUDA C++ compiled at run time through CuPy/NVRTC).

Importing this package never imports CuPy: `cuda_available()` says why CUDA cannot be used (or None
when it can), and CuPy is loaded only when a `CudaBackend` is created, so cuzk installs and runs
without any CUDA package.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuzk.backends.cuda.backend import CudaBackend

__all__ = ["CudaBackend", "cuda_available"]

_REASON: list[str | None] = []


def cuda_available() -> str | None:
    """None when a CUDA device and CuPy are usable here, otherwise the reason they are not."""
    if _REASON:
        return _REASON[0]
    reason: str | None = None
    if importlib.util.find_spec("cupy") is None:
        reason = "CuPy is not installed (pip install cupy-cuda13x or cupy-cuda12x)"
    else:
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() < 1:
                reason = "no CUDA device is visible"
        except Exception as exc:  # any driver/runtime failure means "not usable here"
            reason = f"CUDA is not usable: {type(exc).__name__}: {exc}"
    _REASON.append(reason)
    return reason


def __getattr__(name: str) -> Any:
    if name == "CudaBackend":
        from cuzk.backends.cuda.backend import CudaBackend

        return CudaBackend
    raise AttributeError(name)
