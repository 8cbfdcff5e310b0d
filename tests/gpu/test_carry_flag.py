"""The carry flag between the carry primitives of kernels/common.cuh after a subtraction.

A GPU keeps an adder's carry out: after `sub.cc` the flag is 1 when the subtraction did NOT borrow, so
an `addc` that follows adds NOT borrow, while `subc` subtracts the borrow as documented. The host
emulator must keep the same flag, or a kernel mixing the two kinds of chain passes on the emulator and
fails on a card, as the first form of the Fr product's low-limb fold did (docs/gpu.md).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from cuzk.backends.cuda import cuda_available, runtime
from cuzk.backends.cuda.sources import KERNEL_DIR, NVRTC_OPTIONS

#: (a, b): a - b borrows in the first two.
PAIRS = ((0, 5), (7, 0xFFFFFFFF), (5, 0), (0, 0), (0xFFFFFFFF, 1))
BORROWS = tuple(a < b for a, b in PAIRS)

KERNEL = """
KERNEL carry_flags(const u32* pairs, u32 n, u32* out) {
    for (u32 k = 0; k < n; ++k) {
        sub_cc(pairs[2 * k], pairs[2 * k + 1]);
        out[3 * k] = addc(0, 0);           // the flag as an addition reads it
        sub_cc(pairs[2 * k], pairs[2 * k + 1]);
        out[3 * k + 1] = subc(0, 0);       // 0 - borrow: the mask the field code takes
        add_cc(pairs[2 * k], pairs[2 * k + 1]);
        out[3 * k + 2] = addc(0, 0);       // an addition's carry
    }
}
"""


def expected() -> np.ndarray:
    rows = [(0 if borrow else 1, 0xFFFFFFFF if borrow else 0, int(a + b > 0xFFFFFFFF))
            for (a, b), borrow in zip(PAIRS, BORROWS, strict=True)]
    return np.array(rows, dtype=np.uint32)


def source() -> str:
    return (KERNEL_DIR / "common.cuh").read_text().replace("#pragma once", "") + KERNEL


def test_the_emulator_keeps_the_gpus_flag(tmp_path) -> None:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to build the host emulator")
    pairs = ", ".join(f"{v}u" for pair in PAIRS for v in pair)
    main = source() + f"""
#include <cstdio>
int main() {{
    const u32 pairs[] = {{{pairs}}};
    u32 out[{3 * len(PAIRS)}];
    carry_flags(pairs, {len(PAIRS)}, out);
    for (u32 v : out) std::printf("%u\\n", v);
}}
"""
    src, exe = tmp_path / "flags.cpp", tmp_path / "flags"
    src.write_text(main)
    subprocess.run([cxx, "-O2", "-std=c++17", "-DCUZK_HOST_EMU", str(src), "-o", str(exe)], check=True)
    got = np.array(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.uint64).astype(np.uint32).reshape(-1, 3)
    assert np.array_equal(got, expected())


def test_a_card_keeps_an_adders_flag() -> None:
    why = cuda_available()
    if why is not None or runtime.emulated():
        pytest.skip(f"needs a real GPU: {why or 'the emulated device has no PTX'}")
    import cupy as cp

    kernel = cp.RawKernel(source(), "carry_flags", options=NVRTC_OPTIONS)
    pairs = cp.asarray(np.array(PAIRS, dtype=np.uint32).reshape(-1))
    out = cp.zeros(3 * len(PAIRS), dtype=cp.uint32)
    kernel((1,), (1,), (pairs, np.uint32(len(PAIRS)), out))
    assert np.array_equal(cp.asnumpy(out).reshape(-1, 3), expected())
