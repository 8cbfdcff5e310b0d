"""Compiling cuzk's CUDA kernels at run time (CuPy RawModule through NVRTC) and launching them.

The kernels come in named units (`UNITS`), each compiled on its own: "curve" holds the field,
curve, NTT and MSM kernels (46 CPU-seconds of NVRTC on the H200 host), "synthesis" the
sparse products of compiled circuits (common.cuh, mont.cuh, fr.cuh, spmv.cu: 2 s there), "witness"
the SHA-256 witness generator (common.cuh, sha256_witness.cu: under a second), "poseidon" the
Merkle-path witness generator over Poseidon trees (poseidon_witness.cu: seconds), "setup" the
fixed-base multiplications of parameter generation (fixed_base.cu over the G1/G2 arithmetic), so a change to one
unit never recompiles another. A unit's files are joined into one translation unit in
dependency order (their local ``#include`` lines exist for standalone ``nvcc`` checks and are
dropped here), so the unit's compiled-module cache key, a hash of its full source and the options,
changes whenever any of its files does. CuPy keeps the cubins on disk; we point its cache at
``$CUZK_KERNEL_CACHE`` (default ``$XDG_CACHE_HOME/cuzk/kernels``) so that a restarted daemon loads
them in milliseconds instead of recompiling. An ahead-of-time nvcc build (`build_cubin`) placed in
that directory is used in preference. CuPy adds ``-arch=sm_XX`` for the current device itself
(sm_90 on an H100/H200), producing native code rather than PTX for the driver to JIT.

Everything that drives kernels (ntt.py, msm.py, spmv.py) talks to a `KernelModule`: ``launch`` plus
``xp`` (the array module). Tests on machines without a GPU can substitute an object with the same
interface.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from cuzk.backends.cuda.runtime import emulated, get_cupy
from cuzk.backends.cuda.sources import (
    DEFAULT_UNIT,
    KERNEL_DIR,
    NVRTC_OPTIONS,
    SOURCE_FILES,
    UNITS,
    _unit_files,
    kernel_source,
    source_digest,
)

__all__ = ["DEFAULT_UNIT", "KERNEL_DIR", "NVRTC_OPTIONS", "SOURCE_FILES", "UNITS", "KernelModule", "build_cubin",
           "cubin_path", "get_module", "kernel_cache_dir", "kernel_source", "source_digest"]


def cubin_path(arch: str, directory: Path | None = None, unit: str = DEFAULT_UNIT,
               kernel_dir: Path | None = None) -> Path:
    """Where an ahead-of-time build of a unit's current source for `arch` (e.g. "sm_90") is looked for.
    The curve unit keeps the name it had before there were units, so existing builds stay valid."""
    prefix = "cuzk" if unit == DEFAULT_UNIT else f"cuzk-{unit}"
    return (directory or kernel_cache_dir()) / f"{prefix}-{source_digest(unit, kernel_dir)}-{arch}.cubin"


def build_cubin(arch: str = "sm_90", directory: Path | None = None, nvcc: str = "nvcc",
                unit: str = DEFAULT_UNIT, kernel_dir: Path | None = None) -> Path:
    """Compile a unit's kernels ahead of time with nvcc (a minute of CPU for the curve unit) into
    `cubin_path(arch, unit=unit)`. `kernel_dir`: other kernel sources than the package's (another
    revision's, for benchmarks that time two builds side by side), named by their own digest.

    A process that finds this file loads it instead of running NVRTC, e.g. after building the
    cubin once on a machine with the CUDA toolkit and shipping it with a deployment.
    """
    if shutil.which(nvcc) is None:
        raise FileNotFoundError(f"{nvcc} not found")
    out = cubin_path(arch, directory, unit, kernel_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"cuzk_{unit}.cu"
        src.write_text(kernel_source(unit, kernel_dir))
        tmp_out = Path(tmp) / out.name
        subprocess.run([nvcc, "-cubin", f"-arch={arch}", *NVRTC_OPTIONS, "-o", str(tmp_out), str(src)],
                       check=True, capture_output=True, text=True)
        shutil.move(str(tmp_out), out)
    return out


def kernel_cache_dir() -> Path:
    """Where compiled kernels are kept between processes."""
    explicit = os.environ.get("CUZK_KERNEL_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuzk" / "kernels"


class KernelModule:
    """The compiled kernels of one unit on one device, with CuPy arrays as ``xp``."""

    def __init__(self, device_id: int = 0, unit: str = DEFAULT_UNIT) -> None:
        cupy = get_cupy()
        _unit_files(unit)
        self.xp = cupy
        self.device_id = device_id
        self.unit = unit
        cache = kernel_cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        # CuPy reads the variable at compile time; only set it when the user has not chosen one.
        os.environ.setdefault("CUPY_CACHE_DIR", str(cache))
        with cupy.cuda.Device(device_id):
            props = cupy.cuda.runtime.getDeviceProperties(device_id)
            self.num_sms = int(props["multiProcessorCount"])
            aot = cubin_path(f"sm_{props['major']}{props['minor']}", cache, unit)
            # An emulated device runs the sources (built for the host), never a cubin.
            use_aot = aot.exists() and not emulated()
            self.source = "cubin" if use_aot else "emulated" if emulated() else "nvrtc"
            if use_aot:
                self._module = cupy.RawModule(path=str(aot))
            else:
                self._module = cupy.RawModule(code=kernel_source(unit), options=NVRTC_OPTIONS)
                self._module.compile()
        self._functions: dict[str, Any] = {}

    def function(self, name: str) -> Any:
        fn = self._functions.get(name)
        if fn is None:
            fn = self._functions[name] = self._module.get_function(name)
        return fn

    def allow_shared_memory(self, name: str, nbytes: int) -> None:
        """Let kernel `name` take up to `nbytes` of dynamic shared memory (over the 48 KiB default)."""
        fn = self.function(name)
        if fn.max_dynamic_shared_size_bytes < nbytes:
            fn.max_dynamic_shared_size_bytes = int(nbytes)

    def launch(self, name: str, grid: int, block: int, args: tuple | list, shared_mem: int = 0) -> None:
        """Launch on the current stream. Python ints become u32, None a null pointer."""
        conv = []
        for a in args:
            if a is None:
                conv.append(np.uint64(0))
            elif isinstance(a, int):
                if not 0 <= a < 1 << 32:
                    raise ValueError(f"{name}: integer argument {a} does not fit in u32")
                conv.append(np.uint32(a))
            else:
                conv.append(a)
        self.function(name)((int(grid),), (int(block),), tuple(conv), shared_mem=int(shared_mem))

    def launch1d(self, name: str, n: int, args: tuple | list, block: int = 256) -> None:
        """One thread per item, `block` threads a block."""
        if n > 0:
            self.launch(name, (n + block - 1) // block, block, args)

    def to_host(self, a: Any) -> np.ndarray:
        """A copy on the host, once the current stream's work is done. The wait comes first, in a stream
        synchronisation: a copy to pageable memory issued while kernels still run waits inside the
        driver, and every other host thread's CUDA calls stall behind it meanwhile, uploads beside the
        MSM included (benchmarks/results/cuda-upload-load-h200-2026-12-01.jsonl)."""
        self.synchronize()
        return self.xp.asnumpy(a)

    def flatnonzero(self, a: Any) -> Any:
        """xp.flatnonzero, which reads its count back to the host: waited for as `to_host` does."""
        self.synchronize()
        return self.xp.flatnonzero(a)

    def to_device(self, a: np.ndarray) -> Any:
        return self.xp.asarray(a)

    def synchronize(self) -> None:
        self.xp.cuda.get_current_stream().synchronize()


_MODULES: dict[tuple[int, str], KernelModule] = {}
_MODULES_LOCK = threading.Lock()  # guards _UNIT_LOCKS
_UNIT_LOCKS: dict[tuple[int, str], threading.Lock] = {}


def get_module(device_id: int = 0, unit: str = DEFAULT_UNIT) -> KernelModule:
    """The process-wide compiled module of a unit on a device (compiled, or loaded from the cache, once).
    Each unit has its own lock, so units compile side by side (`CudaBackend.prepare_kernels`)."""
    with _MODULES_LOCK:
        lock = _UNIT_LOCKS.setdefault((device_id, unit), threading.Lock())
    with lock:
        mod = _MODULES.get((device_id, unit))
        if mod is None:
            mod = _MODULES[(device_id, unit)] = KernelModule(device_id, unit)
        return mod
