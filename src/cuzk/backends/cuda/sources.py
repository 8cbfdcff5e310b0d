"""cuzk's CUDA sources: the kernel files, grouped in units compiled each on its own (`UNITS`), and a
unit's files joined into one translation unit. Kept apart from `module` (which compiles and loads
them) so that the host emulator (`emulated.kernels`) builds the same text without importing CuPy's side.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).parent / "kernels"
#: Each unit's files in dependency order: each file only uses what the files before it define.
UNITS: dict[str, tuple[str, ...]] = {
    "curve": ("common.cuh", "mont.cuh", "fp.cuh", "fr.cuh", "fp2.cuh", "ec.cuh", "convert.cu", "ntt.cu", "msm.cu"),
    "synthesis": ("common.cuh", "mont.cuh", "fr.cuh", "spmv.cu"),
    "witness": ("common.cuh", "sha256_witness.cu"),
    "poseidon": ("common.cuh", "mont.cuh", "fr.cuh", "poseidon_witness.cu"),
    "setup": ("common.cuh", "mont.cuh", "fp.cuh", "fp2.cuh", "ec.cuh", "fixed_base.cu"),
}
#: The unit a `KernelModule` compiles unless told otherwise (its cubin names predate the units).
DEFAULT_UNIT = "curve"
SOURCE_FILES = UNITS[DEFAULT_UNIT]
NVRTC_OPTIONS = ("--std=c++17", "-DCUZK_NVRTC=1")

_LOCAL_INCLUDE = re.compile(r'^\s*#\s*(include\s+"[^"]+"|pragma\s+once)\s*$', re.MULTILINE)


def _unit_files(unit: str) -> tuple[str, ...]:
    files = UNITS.get(unit)
    if files is None:
        raise ValueError(f"unknown kernel unit {unit!r} (known: {', '.join(sorted(UNITS))})")
    return files


def kernel_source(unit: str = DEFAULT_UNIT, kernel_dir: Path | None = None) -> str:
    """A unit's kernel files as one translation unit, with their local includes removed. `kernel_dir`:
    where the files are (default `KERNEL_DIR`; another revision's, to build it side by side)."""
    parts = []
    for name in _unit_files(unit):
        text = ((kernel_dir or KERNEL_DIR) / name).read_text()
        parts.append(f"// ---- {name}\n" + _LOCAL_INCLUDE.sub("", text))
    return "\n".join(parts)


def source_digest(unit: str = DEFAULT_UNIT, kernel_dir: Path | None = None) -> str:
    """Names a unit's compiled module: any change of one of its files or of the options gives a new name."""
    return hashlib.sha256((kernel_source(unit, kernel_dir) + repr(NVRTC_OPTIONS)).encode()).hexdigest()[:20]
