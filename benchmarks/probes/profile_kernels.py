"""Run one G1 MSM (2^24) and one NTT (2^27) so that Nsight Compute can profile chosen kernels.

    ncu --kernel-name regex:'msm_tree_round_g1|ntt_dif_pass_1024' --launch-count 2 \
        --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
        python benchmarks/probes/profile_kernels.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda_partition, bench_cuda
from bench_cuda import R, random_scalars

from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.msm import DeviceMsm
from cuzk.backends.cuda.ntt import DeviceNtt
from cuzk.curve.encoding import g1_points_to_uncompressed
from cuzk.curve.points import G1Point, Scalar


def main() -> None:
    k = get_module()
    eng = DeviceMsm(k)
    prng = random.Random(7)
    pool = [G1Point() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little")) for _ in range(1024)]
    dev_pool = eng.upload_bases("g1", g1_points_to_uncompressed(pool))
    rng = np.random.default_rng(1)
    n = 1 << 24
    bases = dev_pool[cp.asarray(rng.integers(0, len(pool), size=n))]
    scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
    eng.msm("g1", bases, scalars)
    del bases, scalars
    ntt = DeviceNtt(k)
    data = cp.random.randint(0, 2**31, size=(1 << 27, 8), dtype=cp.int64).astype(cp.uint32)
    data[:, 7] &= 0x0FFFFFFF
    ntt.dif(data, 27, ntt.default_root(27))
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
