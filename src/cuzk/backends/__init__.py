"""Proving backends behind one interface: `cpu` (always available) and, on NVIDIA hosts, `cuda`."""

from cuzk.backends.base import DeviceInfo, ProverBackend
from cuzk.backends.cpu import CpuBackend

__all__ = ["CpuBackend", "DeviceInfo", "ProverBackend"]
