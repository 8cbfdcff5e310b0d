"""The CUDA backend: our own kernels (CUDA C++ compiled at run time through CuPy/NVRTC).

Importing this package never imports CuPy: `cuda_available()` says why CUDA cannot be used (or None
when it can), and CuPy is loaded only when a `CudaBackend` is created, so cuzk installs and runs
without any CUDA package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cuzk.backends.cuda.available import cuda_available

if TYPE_CHECKING:
    from cuzk.backends.cuda.backend import CudaBackend

__all__ = ["CudaBackend", "cuda_available"]


def __getattr__(name: str) -> Any:
    if name == "CudaBackend":
        from cuzk.backends.cuda.backend import CudaBackend

        return CudaBackend
    raise AttributeError(name)
