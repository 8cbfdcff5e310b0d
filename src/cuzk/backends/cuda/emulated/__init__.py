"""An emulated CUDA device: the part of CuPy's interface `cuzk.backends.cuda` uses, on the host.

It exists so that the whole GPU path (`CudaBackend`: memory plans, caps, streaming, staging, the
device lock and preemption, the OOM retry; the device processes of the daemon) runs and is tested
on machines without a GPU. It is a development and test device: chosen only by `CARDS_ENV`
(`[gpus] emulate` in the configuration sets it), never by `gpus.backend = "auto"`. What it covers
and what it cannot (warp-level behaviour, kernels running side by side, speed): docs/gpu.md.

- Kernels: the `.cu` sources compiled as C++ (`kernels`), each launch run on its stream's thread.
- Memory: each card has a capacity shared by every process on it; CuPy's pool, its limit and
  `memGetInfo` over it (`device`); past it, `OutOfMemoryError` as CuPy raises it.
- Order: streams run later than their work is queued, events complete when their stream reaches
  them, a copy from pinned memory that the host rewrote before it ran fails naming the buffer
  (`arrays`).

`cupy()` and `cupyx()` give namespaces shaped as those modules; `cuzk.backends.cuda.runtime` picks
them or the real ones. (Its modules import each other by full name, not from this package, which
imports them.)
"""

from __future__ import annotations

import types

import numpy as np

import cuzk.backends.cuda.emulated.arrays as arrays
import cuzk.backends.cuda.emulated.device as device
import cuzk.backends.cuda.emulated.kernels as kernels
from cuzk.backends.cuda.emulated.device import CARDS_ENV, card_sizes

__all__ = ["CARDS_ENV", "card_sizes", "cupy", "cupyx", "enabled"]


def enabled() -> bool:
    """Whether the emulated cards replace CUDA in this process (`CARDS_ENV` names at least one)."""
    return bool(card_sizes())


class _DefaultPool:
    """CuPy's MemoryPool: the current device's pool."""

    def __getattr__(self, name: str) -> object:
        return getattr(device.device_state(device.current_device_id()).pool, name)


def _runtime() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        CUDARuntimeError=device.CUDARuntimeError,
        memcpyAsync=arrays.memcpy_async,
        memcpyHostToDevice=arrays.memcpyHostToDevice,
        memcpyDeviceToHost=arrays.memcpyDeviceToHost, memcpyDeviceToDevice=arrays.memcpyDeviceToDevice,
        memGetInfo=device.mem_get_info, getDeviceProperties=device.device_properties,
        getDeviceCount=device.device_count,
        hostRegister=arrays.host_register, hostUnregister=arrays.host_unregister,
    )


_POOL = _DefaultPool()
_CUPY = types.SimpleNamespace(
    ndarray=arrays.ndarray, empty=arrays.empty, zeros=arrays.zeros, empty_like=arrays.empty_like,
    zeros_like=arrays.zeros_like, full=arrays.full, asarray=arrays.asarray,
    asnumpy=arrays.asnumpy, ascontiguousarray=arrays.ascontiguousarray, take=arrays.take,
    concatenate=arrays.concatenate, cumsum=arrays.cumsum, arange=arrays.arange, flatnonzero=arrays.flatnonzero,
    uint8=np.uint8, uint16=np.uint16, uint32=np.uint32, uint64=np.uint64, int32=np.int32, int64=np.int64,
    bool_=np.bool_, float32=np.float32, float64=np.float64, dtype=np.dtype,
    RawModule=kernels.RawModule,
    get_default_memory_pool=lambda: _POOL,
    cuda=types.SimpleNamespace(
        Device=device.Device, Stream=device.Stream, Event=device.Event,
        get_current_stream=device.current_stream, get_elapsed_time=device.get_elapsed_time,
        set_allocator=arrays.set_allocator,
        runtime=_runtime(),
        driver=types.SimpleNamespace(CUDADriverError=device.CUDADriverError),
        memory=types.SimpleNamespace(OutOfMemoryError=device.OutOfMemoryError, MemoryPointer=device.MemoryPointer),
    ),
)
_CUPYX = types.SimpleNamespace(empty_pinned=arrays.empty_pinned)


def cupy() -> types.SimpleNamespace:
    return _CUPY


def cupyx() -> types.SimpleNamespace:
    return _CUPYX
