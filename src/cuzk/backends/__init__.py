"""Proving backends behind one interface: `cpu` (always available) and, on NVIDIA hosts, `cuda`.

The names are loaded on first use: a process that only needs `cuzk.backends.device_lock` (a device
worker finding its entry point before it sets numba's thread count) must not import numba with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuzk.backends.base import DeviceInfo, ProverBackend
    from cuzk.backends.cpu import CpuBackend

__all__ = ["CpuBackend", "DeviceInfo", "ProverBackend"]


def __getattr__(name: str) -> Any:
    if name == "CpuBackend":
        from cuzk.backends.cpu import CpuBackend

        return CpuBackend
    if name in ("DeviceInfo", "ProverBackend"):
        from cuzk.backends import base

        return getattr(base, name)
    raise AttributeError(name)
