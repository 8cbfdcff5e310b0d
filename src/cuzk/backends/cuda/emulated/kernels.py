"""A host emulator of cuzk's CUDA kernels: `EmuModule` has the interface of `KernelModule`
(cuzk.backends.cuda.module) over numpy arrays, for kernel-level tests on machines without a GPU, and
`RawModule` CuPy's, for the emulated device (`cuzk.backends.cuda.emulated`), whose launches run on
the stream they are queued on.

    CUZK_TEST_KERNEL_MODULE=tests/gpu/kernel_emulator.py .venv/bin/python -m pytest tests/gpu/test_cuda_field.py

A unit's source (`kernel_source(unit)`) is compiled as plain C++ with ``-DCUZK_HOST_EMU`` (see
kernels/common.cuh) together with a generated shim: for each kernel an ``emu_launch_<name>(grid,
block, smem_bytes, <its parameters>)`` that runs the grid sequentially, a ``KERNEL`` once per
(block, thread) and a ``BLOCK_KERNEL`` once per block (its phases loop over the threads), with
`smem_bytes` of zeroed, 16-byte aligned dynamic shared memory per block. The kernels are found in
the preprocessed source, so those made by macros (msm.cu's ``CUZK_ACC_KERNEL`` etc., spmv.cu's
``SPMV_KERNELS``) are included; none is skipped today (a kernel with a by-value parameter type
outside `_SCALARS` would be, and is listed in `EmuModule.skipped`). The shared library is cached
under ``$CUZK_EMU_CACHE`` (default ``~/.cache/cuzk/emulator``) by a hash of source, shim and flags.

Not emulated: warp shuffles and votes (the sources fall back to shuffle-free paths under
CUZK_HOST_EMU, e.g. ntt.cu's warp stages), concurrency between threads (a ``KERNEL`` that shares
memory between threads across a ``SYNC()`` runs wrongly), CuPy streams and events for `EmuModule`
(``xp`` is numpy; the emulated device has them), ``LAUNCH_BOUNDS`` limits, register and occupancy limits, and timing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from cuzk.backends.cuda.sources import DEFAULT_UNIT, UNITS, kernel_source

CXX = "g++"
FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC", "-DCUZK_HOST_EMU")
MAX_BLOCK = 1024
DEFAULT_SMEM = 48 * 1024  # dynamic shared memory a kernel may take before `allow_shared_memory`
MAX_SMEM = 227 * 1024  # the most a block may take on sm_90

#: By-value parameter types the shim can pass (pointers of any type go as void*).
_SCALARS: dict[str, type] = {
    "u8": ctypes.c_uint8, "unsigned char": ctypes.c_uint8, "u16": ctypes.c_uint16,
    "unsigned short": ctypes.c_uint16, "u32": ctypes.c_uint32, "unsigned": ctypes.c_uint32,
    "unsigned int": ctypes.c_uint32, "int": ctypes.c_int32, "u64": ctypes.c_uint64,
    "unsigned long long": ctypes.c_uint64, "long long": ctypes.c_int64,
}
# Discovery: mark the kernel macros so that their expansions can be found after preprocessing.
_MARK = re.compile(r"#define\s+(BLOCK_KERNEL|KERNEL)\b")
_DECL = re.compile(r'\bCUZK_EMU_(BLOCK_KERNEL|KERNEL)\s+extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)')
_LAUNCH_LOCK = threading.Lock()  # the emulated globals (threadIdx, emu_smem, ...) are process-wide


class Param(NamedTuple):  # (not a dataclass: the file may be loaded outside sys.modules)
    decl: str  # as declared, e.g. "const fr_t* a"
    type: str  # the declaration without the name, e.g. "const fr_t*"
    ctype: type  # ctypes.c_void_p for pointers

    @property
    def pointer(self) -> bool:
        return self.ctype is ctypes.c_void_p


class Kernel(NamedTuple):
    name: str
    per_block: bool  # BLOCK_KERNEL: called once per block
    params: tuple[Param, ...]

    def signature(self) -> str:
        return f"{self.name}({', '.join(p.decl for p in self.params)})"


def _parse_param(decl: str) -> Param | None:
    """A parameter's declaration ("const u32* raw", "u32 n"), or None for a type the shim cannot pass."""
    decl = " ".join(decl.split())
    name = re.search(r"\w+$", decl)
    ptype = decl[: name.start()].strip() if name else decl
    if "*" in ptype:
        return Param(decl, ptype, ctypes.c_void_p)
    ctype = _SCALARS.get(re.sub(r"^const\s+", "", ptype))
    return None if ctype is None else Param(decl, ptype, ctype)


def find_kernels(source: str) -> tuple[list[Kernel], dict[str, str]]:
    """The kernels of a unit's source (after preprocessing) and those skipped, with why."""
    marked = _MARK.sub(r"#define \1 CUZK_EMU_\1", source)
    pre = subprocess.run([CXX, "-E", "-P", "-std=c++17", "-DCUZK_HOST_EMU", "-x", "c++", "-"], input=marked,
                         capture_output=True, text=True)
    if pre.returncode != 0:
        raise RuntimeError(f"preprocessing the kernels failed:\n{pre.stderr[-4000:]}")
    kernels, skipped = [], {}
    for kind, name, plist in _DECL.findall(pre.stdout):
        decls = [d for d in plist.split(",") if d.strip() not in ("", "void")]
        params = [_parse_param(d) for d in decls]
        bad = [d.strip() for d, p in zip(decls, params, strict=True) if p is None]
        if bad:
            skipped[name] = f"parameter type not supported by the emulator: {', '.join(bad)}"
        else:
            kernels.append(Kernel(name, kind == "BLOCK_KERNEL", tuple(p for p in params if p is not None)))
    return kernels, skipped


def make_shim(kernels: list[Kernel]) -> str:
    """C++ launchers emu_launch_<name>(grid, block, smem_bytes, params...) running a grid sequentially."""
    out = ["// ---- emulator shim", "#include <cstdlib>", """
static void emu_begin(u32 grid, u32 block, u32 smem_bytes) {
    gridDim = {grid, 1, 1}; blockDim = {block, 1, 1}; blockIdx = {0, 0, 0}; threadIdx = {0, 0, 0};
    emu_smem = smem_bytes ? static_cast<unsigned char*>(std::aligned_alloc(16, (smem_bytes + 15) / 16 * 16)) : nullptr;
}
static void emu_enter_block(u32 b, u32 smem_bytes) {
    blockIdx.x = b; threadIdx.x = 0;
    if (emu_smem) std::memset(emu_smem, 0, smem_bytes);
}
static void emu_end() { std::free(emu_smem); emu_smem = nullptr; }
"""]
    for k in kernels:
        params = "".join(f", {p.type} a{i}" for i, p in enumerate(k.params))
        call = f"{k.name}({', '.join(f'a{i}' for i in range(len(k.params)))});"
        body = call if k.per_block else f"for (u32 t = 0; t < emu_block; ++t) {{ threadIdx.x = t; {call} }}"
        out.append(f"""extern "C" void emu_launch_{k.name}(u32 emu_grid, u32 emu_block, u32 emu_smem_bytes{params}) {{
    emu_begin(emu_grid, emu_block, emu_smem_bytes);
    for (u32 b = 0; b < emu_grid; ++b) {{
        emu_enter_block(b, emu_smem_bytes);
        {body}
    }}
    emu_end();
}}""")
    return "\n".join(out) + "\n"


def cache_dir() -> Path:
    explicit = os.environ.get("CUZK_EMU_CACHE")
    return Path(explicit) if explicit else Path.home() / ".cache" / "cuzk" / "emulator"


def build(unit: str) -> tuple[Path, list[Kernel], dict[str, str]]:
    """Compile a unit with its shim (or find it in the cache): the library's path, its kernels, the skipped."""
    return build_source(kernel_source(unit), unit)


def build_source(source: str, unit: str) -> tuple[Path, list[Kernel], dict[str, str]]:
    """`build` for any source (a `RawModule`'s code); `unit` names the cached library."""
    kernels, skipped = find_kernels(source)
    full = source + "\n" + make_shim(kernels)
    digest = hashlib.sha256((full + repr(FLAGS)).encode()).hexdigest()[:20]
    out = cache_dir() / f"cuzk-emu-{unit}-{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        res = subprocess.run([CXX, *FLAGS, "-x", "c++", "-", "-o", str(tmp)], input=full, capture_output=True,
                             text=True)
        if res.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"compiling the {unit!r} kernels for the emulator failed:\n{res.stderr[-4000:]}")
        os.replace(tmp, out)
    return out, kernels, skipped


class EmuModule:
    """The kernels of one unit run on the host; arrays are numpy arrays (`xp` is numpy)."""

    xp = np
    num_sms = 1
    source = "emulator"

    def __init__(self, unit: str = DEFAULT_UNIT, source: str | None = None) -> None:
        self.unit = unit
        path, kernels, self.skipped = build(unit) if source is None else build_source(source, unit)
        self._lib = ctypes.CDLL(str(path))
        self.kernels = {k.name: k for k in kernels}
        self._fns: dict[str, Any] = {}
        self._smem_limit: dict[str, int] = {}
        for k in kernels:
            fn = getattr(self._lib, f"emu_launch_{k.name}")
            fn.argtypes = [ctypes.c_uint32] * 3 + [p.ctype for p in k.params]
            fn.restype = None
            self._fns[k.name] = fn

    def _kernel(self, name: str) -> Kernel:
        k = self.kernels.get(name)
        if k is None:
            why = self.skipped.get(name, "no such kernel")
            raise KeyError(f"kernel {name!r} is not in the emulated {self.unit!r} unit: {why}")
        return k

    def function(self, name: str) -> Kernel:
        """The kernel's parsed declaration (the emulator has no function objects)."""
        return self._kernel(name)

    def allow_shared_memory(self, name: str, nbytes: int) -> None:
        """As on the GPU: a kernel takes more than 48 KiB of dynamic shared memory only once allowed."""
        self._kernel(name)
        if nbytes > MAX_SMEM:
            raise ValueError(f"{name}: {nbytes} bytes of shared memory exceed the device's {MAX_SMEM}")
        self._smem_limit[name] = max(self._smem_limit.get(name, DEFAULT_SMEM), int(nbytes))

    def launch(self, name: str, grid: int, block: int, args: tuple | list, shared_mem: int = 0) -> None:
        """Run a kernel over the whole grid now. Python ints become u32 (u64 for a u64 parameter), None a
        null pointer, numpy arrays (C-contiguous) their data pointer."""
        self.run(name, grid, block, shared_mem, self.prepare(name, grid, block, args, shared_mem))

    def prepare(self, name: str, grid: int, block: int, args: tuple | list, shared_mem: int = 0) -> list:
        """A launch's arguments checked and converted for `run` (the errors a launch reports at once)."""
        k = self._kernel(name)
        if len(args) != len(k.params):
            raise TypeError(f"{name}: {len(args)} arguments given, the kernel takes {len(k.params)}: {k.signature()}")
        grid, block, shared_mem = int(grid), int(block), int(shared_mem)
        if not (1 <= grid < 1 << 31 and 1 <= block <= MAX_BLOCK):
            raise ValueError(f"{name}: invalid launch configuration grid={grid} block={block}")
        limit = self._smem_limit.get(name, DEFAULT_SMEM)
        if not 0 <= shared_mem <= limit:
            raise ValueError(f"{name}: {shared_mem} bytes of dynamic shared memory, over the allowed {limit}"
                             " (see allow_shared_memory)")
        return [_convert(name, p, a) for p, a in zip(k.params, args, strict=True)]

    def run(self, name: str, grid: int, block: int, shared_mem: int, converted: list) -> None:
        """Run a prepared launch; the caller keeps its arrays alive until this returns."""
        with _LAUNCH_LOCK:
            self._fns[name](int(grid), int(block), int(shared_mem), *converted)

    def launch1d(self, name: str, n: int, args: tuple | list, block: int = 256) -> None:
        """One thread per item, `block` threads a block."""
        if n > 0:
            self.launch(name, (n + block - 1) // block, block, args)

    def to_device(self, a: Any) -> np.ndarray:
        return np.array(a, order="C", copy=True)

    def to_host(self, a: Any) -> np.ndarray:
        return np.array(a, copy=True)

    def flatnonzero(self, a: Any) -> np.ndarray:
        return np.flatnonzero(a)

    def synchronize(self) -> None:
        pass


def _convert(kernel: str, param: Param, value: Any) -> int | None:
    where = f"{kernel}: argument `{param.decl}`"
    if param.pointer:
        if value is None:
            return None
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{where} needs a numpy array or None, got {type(value).__name__}")
        if not value.flags.c_contiguous:
            raise ValueError(f"{where}: the array is not C-contiguous (shape {value.shape}, strides {value.strides})")
        return value.ctypes.data
    size = ctypes.sizeof(param.ctype)
    if isinstance(value, np.integer):
        if value.dtype.itemsize != size:  # the GPU would read the wrong number of bytes
            raise TypeError(f"{where} takes {size} bytes, got a {value.dtype} scalar")
        return int(value)
    if isinstance(value, int):
        if size not in (4, 8):
            raise TypeError(f"{where}: pass a numpy scalar of the parameter's type, not a Python int")
        bits = 64 if param.ctype is ctypes.c_uint64 else 32
        if not 0 <= value < 1 << bits:
            raise ValueError(f"{where}: integer {value} does not fit in u{bits}")
        return value
    raise TypeError(f"{where} needs an integer, got {type(value).__name__}")


# -- CuPy's RawModule on the emulated device ---------------------------------------------------------------

class RawFunction:
    """A kernel of a `RawModule`: a call checks the launch now and queues it on the current stream."""

    def __init__(self, module: EmuModule, name: str) -> None:
        self._module, self.name = module, name
        module.function(name)

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        return self._module._smem_limit.get(self.name, DEFAULT_SMEM)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes: int) -> None:
        self._module.allow_shared_memory(self.name, nbytes)

    def __call__(self, grid: tuple, block: tuple, args: tuple, *, shared_mem: int = 0, stream: Any = None) -> None:
        import cuzk.backends.cuda.emulated.arrays as arrays
        import cuzk.backends.cuda.emulated.device as device

        dims = [int(g) for g in (grid if isinstance(grid, tuple) else (grid,))]
        bdims = [int(b) for b in (block if isinstance(block, tuple) else (block,))]
        if any(d != 1 for d in dims[1:] + bdims[1:]):
            raise ValueError(f"{self.name}: the emulator runs 1-D grids and blocks only, got {grid} x {block}")
        params = self._module.function(self.name).params
        if len(args) != len(params):
            raise TypeError(f"{self.name}: {len(args)} arguments given, the kernel takes {len(params)}")
        plain = []
        for p, a in zip(params, args, strict=True):
            if isinstance(a, arrays.ndarray):
                plain.append(a.host_view())
            elif isinstance(a, np.ndarray):
                raise TypeError(f"{self.name}: argument `{p.decl}` is a host (numpy) array; a kernel takes device "
                                "arrays")
            elif p.pointer and isinstance(a, np.integer) and int(a) == 0:
                plain.append(None)
            else:
                plain.append(a)
        converted = self._module.prepare(self.name, dims[0], bdims[0], plain, shared_mem)
        queue = stream if stream is not None else device.current_stream()

        def run(plain: list = plain) -> None:  # `plain` keeps the arrays' memory alive until the launch
            self._module.run(self.name, dims[0], bdims[0], shared_mem, converted)
        queue.launch(run, f"kernel {self.name}")


class RawModule:
    """CuPy's RawModule for the emulated device: `code` compiled as C++ for the host (cached)."""

    def __init__(self, code: str | None = None, *, path: str | None = None, options: tuple = (),
                 name_expressions: Any = None, **kwargs: Any) -> None:
        if code is None:
            from cuzk.backends.cuda.emulated.device import CUDADriverError

            raise CUDADriverError(218, f"the emulated device runs CUDA sources, not a compiled module ({path})")
        # One of cuzk's units keeps its name, so the kernel tests' build of it is found in the cache.
        raw = "raw-" + hashlib.sha256(code.encode()).hexdigest()[:12]
        unit = next((u for u in UNITS if kernel_source(u) == code), raw)
        self._module = EmuModule(unit, source=code)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Built when made."""

    def get_function(self, name: str) -> RawFunction:
        return RawFunction(self._module, name)
