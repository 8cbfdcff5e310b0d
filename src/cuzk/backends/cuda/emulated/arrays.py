"""Device arrays of the emulated card, pinned host memory, and copies between them.

`ndarray` is a numpy array over a block of the card's pool (`device.Pool`), so slicing, views and
numpy's arithmetic work as CuPy's do. What reads or writes device data on the host (arithmetic,
gathers, item assignment, `get`) first waits for the current stream, so it runs where CuPy would
have queued it; kernels (`module.RawModule`), `memcpyAsync`, `set` and the fills of `zeros`/`full`
are queued on the stream and run later, on its thread.

A host-to-device copy from pinned memory reads the buffer when it runs: the bytes are hashed when
the copy is queued and again when it runs, and a difference fails the copy naming the buffer and
where it was allocated (the staging bugs `cuzk.backends.cuda.staging` guards against). A copy from
pageable memory takes its bytes when queued, as CUDA stages them.
"""

from __future__ import annotations

import collections
import ctypes
import hashlib
import itertools
import os
import threading
import traceback
import weakref
from typing import Any

import numpy as np

import cuzk.backends.cuda.emulated.device as dev

memcpyHostToDevice, memcpyDeviceToHost, memcpyDeviceToDevice = 1, 2, 3


def _default_malloc(size: int) -> dev.MemoryPointer:
    return dev.device_state(dev.current_device_id()).pool.malloc(size)


_allocator = [_default_malloc]


def set_allocator(allocator: Any = None) -> None:
    _allocator[0] = allocator if allocator is not None else _default_malloc


def _sync() -> None:
    dev.current_stream().synchronize()


class ndarray(np.ndarray):  # noqa: N801 (CuPy's name)
    """A device array (the module docstring). `_mem` keeps its block in use."""

    _mem: dev.MemoryPointer | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self._mem = getattr(obj, "_mem", None)

    @property
    def data(self) -> Any:  # type: ignore[override]
        return _Pointer(int(self.ctypes.data))

    @property
    def device(self) -> dev.Device:
        return dev.Device(self._mem.device_id if self._mem is not None else dev.current_device_id())

    def host_view(self) -> np.ndarray:
        """The same memory as a plain numpy array (for work queued on a stream)."""
        return self.view(np.ndarray)

    def get(self, stream: Any = None, order: str = "C", out: np.ndarray | None = None,
            blocking: bool = True) -> np.ndarray:
        (stream if stream is not None else dev.current_stream()).synchronize()
        if out is None:
            return np.array(self.host_view(), copy=True, order=order)  # type: ignore[call-overload]
        np.copyto(out, self.host_view())
        return out

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError(f"set: host array {arr.shape} {arr.dtype} for device array {self.shape} {self.dtype}")
        if not self.flags.c_contiguous:
            raise ValueError("set: the device array is not C-contiguous")
        src = np.ascontiguousarray(arr)
        copy_async(self.data.ptr, int(src.ctypes.data), src.nbytes, memcpyHostToDevice,
                   stream if stream is not None else dev.current_stream(), keep=src)

    def copy(self, order: str = "C") -> ndarray:  # type: ignore[override]
        _sync()
        return _wrap(self.host_view().copy(order=order))  # type: ignore[arg-type]

    def astype(self, dtype: Any, order: str = "K", casting: Any = None, subok: Any = None,  # type: ignore[override]
               copy: bool = True) -> ndarray:
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        _sync()
        return _wrap(self.host_view().astype(dtype))

    def __getitem__(self, key: Any) -> Any:
        if _advanced(key):
            _sync()
            return _wrap(self.host_view()[_plain(key)])
        out = super().__getitem__(key)
        if isinstance(out, np.ndarray):
            return out  # a view: reads nothing yet
        _sync()  # a value: read once the work writing it has run
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        _sync()
        self.host_view()[_plain(key)] = _plain(value)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        _sync()
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        _sync()
        return _wrap(func(*_plain(args), **_plain(kwargs)))

    # Reading a value waits for the work that writes it, as CuPy's implicit transfers do.
    def __int__(self) -> int:
        _sync()
        return int(self.host_view())

    def __index__(self) -> int:
        _sync()
        return self.host_view().__index__()

    def __float__(self) -> float:
        _sync()
        return float(self.host_view())

    def __bool__(self) -> bool:
        _sync()
        return bool(self.host_view())

    def item(self, *args: Any) -> Any:
        _sync()
        return self.host_view().item(*args)

    def tolist(self) -> Any:
        _sync()
        return self.host_view().tolist()

    def __repr__(self) -> str:
        return f"<emulated device array {self.shape} {self.dtype} on device {self.device.id}>"

    __str__ = __repr__


class _Pointer:
    """CuPy's MemoryPointer as `ndarray.data` gives it: an address, offsets, and async copies."""

    __slots__ = ("ptr",)

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __add__(self, offset: int) -> _Pointer:
        return _Pointer(self.ptr + int(offset))

    def __int__(self) -> int:
        return self.ptr

    @staticmethod
    def _stream(stream: Any) -> Any:
        return stream if stream is not None else dev.current_stream()

    def copy_from_device_async(self, src: _Pointer, size: int, stream: Any = None) -> None:
        copy_async(self.ptr, src.ptr, size, memcpyDeviceToDevice, self._stream(stream))

    def copy_from_host_async(self, src: int, size: int, stream: Any = None) -> None:
        copy_async(self.ptr, int(src), size, memcpyHostToDevice, self._stream(stream))

    def copy_to_host_async(self, dst: int, size: int, stream: Any = None) -> None:
        copy_async(int(dst), self.ptr, size, memcpyDeviceToHost, self._stream(stream))


def _advanced(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, np.ndarray | list) for k in keys)


def _plain(x: Any) -> Any:
    if isinstance(x, ndarray):
        return x.host_view()
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _alloc(shape: Any, dtype: Any) -> ndarray:
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    mem = _allocator[0](nbytes)
    arr = mem.buf[:nbytes].view(dtype).reshape(shape).view(ndarray) if nbytes else \
        np.empty(shape, dtype=dtype).view(ndarray)
    arr._mem = mem
    return arr


def _wrap(result: Any) -> Any:
    """A host result as a new device array (numpy scalars stay scalars)."""
    if isinstance(result, tuple):
        return tuple(_wrap(r) for r in result)
    if not isinstance(result, np.ndarray) or isinstance(result, ndarray):
        return result
    out = _alloc(result.shape, result.dtype)
    out.host_view()[...] = result
    return out


# -- creation and the functions cuzk uses ---------------------------------------------------------------

def empty(shape: Any, dtype: Any = float, order: str = "C") -> ndarray:
    return _alloc(shape, dtype)


def _filled(shape: Any, dtype: Any, value: Any) -> ndarray:
    out = _alloc(shape, dtype)
    plain = out.host_view()
    dev.current_stream().launch(lambda: plain.fill(value), "fill")
    return out


def zeros(shape: Any, dtype: Any = float, order: str = "C") -> ndarray:
    return _filled(shape, dtype, 0)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> ndarray:
    return _filled(shape, dtype if dtype is not None else np.asarray(fill_value).dtype, fill_value)


def empty_like(a: Any, dtype: Any = None) -> ndarray:
    return _alloc(a.shape, dtype if dtype is not None else a.dtype)


def zeros_like(a: Any, dtype: Any = None) -> ndarray:
    return _filled(a.shape, dtype if dtype is not None else a.dtype, 0)


def asarray(a: Any, dtype: Any = None, order: Any = None) -> ndarray:
    if isinstance(a, ndarray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    if isinstance(a, ndarray):
        return a.astype(dtype)
    host = np.ascontiguousarray(a, dtype=dtype)
    out = _alloc(host.shape, host.dtype)
    if host.nbytes:
        copy_async(out.data.ptr, int(host.ctypes.data), host.nbytes, memcpyHostToDevice, dev.current_stream(),
                   keep=host)
    return out



def asnumpy(a: Any, stream: Any = None, order: str = "C", out: np.ndarray | None = None) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out)
    return np.asarray(a, order=order)  # type: ignore[call-overload]


def ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    _sync()
    return _wrap(np.ascontiguousarray(_plain(a), dtype=dtype))


def take(a: Any, indices: Any, axis: int | None = None, out: Any = None) -> Any:
    _sync()
    if out is not None:
        np.take(_plain(a), _plain(indices), axis=axis, out=_plain(out))
        return out
    return _wrap(np.take(_plain(a), _plain(indices), axis=axis))


def _eager(name: str) -> Any:
    fn = getattr(np, name)

    def run(*args: Any, **kwargs: Any) -> Any:
        _sync()
        return _wrap(fn(*_plain(args), **_plain(kwargs)))
    run.__name__ = name
    return run


concatenate = _eager("concatenate")
cumsum = _eager("cumsum")
arange = _eager("arange")
flatnonzero = _eager("flatnonzero")


# -- pinned host memory -------------------------------------------------------------------------------

class _Pinned:
    __slots__ = ("addr", "label", "nbytes")

    def __init__(self, addr: int, nbytes: int, label: str) -> None:
        self.addr, self.nbytes, self.label = addr, nbytes, label


_PINNED: dict[int, _Pinned] = {}
_PINNED_LOCK = threading.Lock()
#: Addresses whose arrays were collected: a finalizer may run anywhere, even inside this module's
#: own code under the lock, so it only queues them and the registry drops them under the lock.
_UNPINNED: collections.deque[int] = collections.deque()


def _registry() -> dict[int, _Pinned]:
    """The registry with collected arrays dropped (the caller holds `_PINNED_LOCK`)."""
    while _UNPINNED:
        _PINNED.pop(_UNPINNED.popleft(), None)
    return _PINNED
_PINNED_IDS = itertools.count(1)
_HERE = os.path.dirname(__file__)


def pinned_bytes() -> int:
    with _PINNED_LOCK:
        return sum(p.nbytes for p in _registry().values())


def _caller() -> str:
    """Where outside the emulator the current call comes from: file:line in function."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        if not frame.filename.startswith(_HERE):
            return f"{os.path.relpath(frame.filename)}:{frame.lineno} in {frame.name}"
    return "?"


def empty_pinned(shape: Any, dtype: Any = float, order: str = "C") -> np.ndarray:
    """A host array in "pinned" memory: registered, so that copies from it are checked (the module
    docstring), and counted against `PINNED_ENV`."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    limit = os.environ.get(dev.PINNED_ENV, "").strip()
    if limit and pinned_bytes() + nbytes > dev.parse_size(limit):
        raise dev.CUDARuntimeError(2, f"cudaErrorMemoryAllocation: {nbytes:,} bytes of pinned host memory over "
                                   f"{dev.PINNED_ENV}={limit} ({pinned_bytes():,} pinned)")
    arr = np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    addr = int(arr.ctypes.data)
    entry = _Pinned(addr, nbytes, f"pinned buffer #{next(_PINNED_IDS)} ({nbytes:,} bytes, allocated at {_caller()})")
    with _PINNED_LOCK:
        _registry()[addr] = entry
    weakref.finalize(arr, _unpin, addr)
    return arr


def host_register(ptr: int, size: int, flags: int = 0) -> None:
    """cudaHostRegister: host memory made "pinned" (registered, so copies from it are checked)."""
    entry = _Pinned(int(ptr), int(size), f"registered host memory ({int(size):,} bytes, registered at {_caller()})")
    with _PINNED_LOCK:
        registry = _registry()
        if entry.addr in registry:
            raise dev.CUDARuntimeError(712, "cudaErrorHostMemoryAlreadyRegistered")
        registry[entry.addr] = entry


def host_unregister(ptr: int) -> None:
    with _PINNED_LOCK:
        if _registry().pop(int(ptr), None) is None:
            raise dev.CUDARuntimeError(713, "cudaErrorHostMemoryNotRegistered")


def _unpin(addr: int) -> None:
    _UNPINNED.append(addr)


def _pinned_at(addr: int, size: int) -> _Pinned | None:
    with _PINNED_LOCK:
        for p in _registry().values():
            if p.addr <= addr and addr + size <= p.addr + p.nbytes:
                return p
    return None


def _digest(addr: int, size: int) -> bytes:
    return hashlib.blake2b(memoryview((ctypes.c_ubyte * size).from_address(addr)), digest_size=16).digest()


def _device_arena(addr: int, size: int, what: str) -> dev._Arena:
    state = dev.device_state(dev.current_device_id())
    arena = state.pool.find(addr, size)
    if arena is None:  # another device's pointer (peer copies are not emulated) or none at all
        for other in list(dev._STATES.values()):
            arena = other.pool.find(addr, size)
            if arena is not None:
                break
    if arena is None:
        raise dev.CUDARuntimeError(1, f"cudaErrorInvalidValue: {what}: [{addr:#x}, +{size:,}) is not device "
                                   "memory of the emulated cards")
    return arena


def copy_async(dst: int, src: int, size: int, kind: int, stream: Any, keep: Any = None) -> None:
    """cudaMemcpyAsync on the emulated card (the module docstring). `keep`: an object the copy must
    keep alive until it has run (the source of a `set`)."""
    size = int(size)
    if size <= 0:
        return
    if kind == memcpyHostToDevice:
        arena = _device_arena(dst, size, "destination")
        pinned = _pinned_at(src, size)
        if pinned is None:  # pageable: staged now, as CUDA does
            data = ctypes.string_at(src, size)

            def copy(arena: Any = arena) -> None:
                ctypes.memmove(dst, data, size)
        else:
            before = _digest(src, size)
            where = _caller()

            def copy(arena: Any = arena, keep: Any = keep) -> None:
                if _digest(src, size) != before:
                    raise dev.CUDARuntimeError(
                        999, f"host-to-device copy of {size:,} bytes from {pinned.label}, offset "
                        f"{src - pinned.addr:,}, queued at {where}: the host wrote those bytes after the copy was "
                        "queued and before it ran")
                ctypes.memmove(dst, src, size)
        stream.launch(copy, f"copy of {size:,} bytes to the device")
    elif kind == memcpyDeviceToHost:
        arena = _device_arena(src, size, "source")
        if _pinned_at(dst, size) is None:  # pageable: returns once the copy is done
            stream.synchronize()
            ctypes.memmove(dst, src, size)
            return

        def back(arena: Any = arena) -> None:
            ctypes.memmove(dst, src, size)
        stream.launch(back, f"copy of {size:,} bytes to the host")
    elif kind == memcpyDeviceToDevice:
        arenas = (_device_arena(src, size, "source"), _device_arena(dst, size, "destination"))

        def move(arenas: Any = arenas) -> None:
            ctypes.memmove(dst, src, size)
        stream.launch(move, f"device copy of {size:,} bytes")
    else:
        raise dev.CUDARuntimeError(1, f"cudaErrorInvalidMemcpyDirection: {kind}")


def memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    copy_async(dst, src, size, kind, dev.stream_by_ptr(int(stream)))

