"""Whether CUDA can be used here, answered without importing CuPy unless it is installed.

The package (`cuzk.backends.cuda`) re-exports `cuda_available`; the backend module asks it before it
loads CuPy, so this lives below both.
"""

from __future__ import annotations

import importlib.util

__all__ = ["cuda_available"]

_REASON: list[str | None] = []


def cuda_available() -> str | None:
    """None when a CUDA device and CuPy are usable here, otherwise the reason they are not. With the
    emulated cards (`cuzk.backends.cuda.emulated`) named in the environment, those are."""
    from cuzk.backends.cuda.runtime import emulated

    if emulated():
        return None
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
