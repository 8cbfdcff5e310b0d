"""One G1 MSM of 2^LOG random scalars, so that Nsight Compute can profile its tree rounds.

The bases are tiled from 4096 points into an array of 2^LOG (the gathers of the first round read
memory at random, as a real key's would). Kernels and DeviceMsm settings are the current defaults.

    ncu --clock-control none --kernel-name regex:'msm_tree_round_g1' --launch-count 2 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \\
        --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \\
        python benchmarks/probes/profile_tree.py 26
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda
from bench_cuda import R, random_scalars

from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.msm import DeviceMsm
from cuzk.curve.encoding import g1_points_to_uncompressed
from cuzk.curve.points import G1Point, Scalar


def main() -> None:
    log_n = int(sys.argv[1]) if len(sys.argv) > 1 else 26
    eng = DeviceMsm(get_module())
    prng = random.Random(7)
    pool = [G1Point() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little")) for _ in range(4096)]
    dev_pool = eng.upload_bases("g1", g1_points_to_uncompressed(pool))
    rng = np.random.default_rng(1)
    n = 1 << log_n
    bases = dev_pool[cp.asarray(rng.integers(0, len(pool), size=n))]
    scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
    eng.msm("g1", bases, scalars)
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
