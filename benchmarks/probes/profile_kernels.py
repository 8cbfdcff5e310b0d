"""One G1 MSM and one NTT, so that Nsight Compute can profile chosen kernels.

The MSM's bases are tiled from `--distinct` random points into an array of 2^`--msm` (the first tree
round's gathers then read memory at random, as a real key's would); its scalars are uniform below r.
The NTT is one forward DIF pass set of 2^`--ntt` points (0: none). Kernels and settings are the
current defaults.

    ncu --kernel-name regex:'msm_tree_round_g1|ntt_dif_pass_1024' --launch-count 2 \\
        --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \\
        python benchmarks/probes/profile_kernels.py --msm 24 --ntt 27
    ncu --clock-control none --kernel-name regex:'msm_tree_round_g1' --launch-count 2 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \\
        --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \\
        python benchmarks/probes/profile_kernels.py --msm 26 --ntt 0 --distinct 4096
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))  # bench_cuda
from bench_cuda import R, random_fr_words, random_scalars

from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.msm import DeviceMsm
from cuzk.backends.cuda.ntt import DeviceNtt
from cuzk.backends.cuda.runtime import get_cupy
from cuzk.curve.encoding import g1_points_to_uncompressed
from cuzk.curve.points import G1Point, Scalar


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msm", type=int, default=24, help="log2 size of the G1 MSM (0: none)")
    ap.add_argument("--ntt", type=int, default=27, help="log2 size of the NTT (0: none)")
    ap.add_argument("--distinct", type=int, default=1024, help="distinct points the MSM's bases are tiled from")
    args = ap.parse_args()
    cp, k = get_cupy(), get_module()
    if args.msm:
        eng = DeviceMsm(k)
        prng = random.Random(7)
        pool = [G1Point() * Scalar.from_le_bytes(prng.randrange(1, R).to_bytes(32, "little"))
                for _ in range(args.distinct)]
        dev_pool = eng.upload_bases("g1", g1_points_to_uncompressed(pool))
        rng = np.random.default_rng(1)
        n = 1 << args.msm
        bases = dev_pool[cp.asarray(rng.integers(0, len(pool), size=n))]
        scalars = cp.asarray(random_scalars(n, rng).view(np.uint32).reshape(n, 8))
        eng.msm("g1", bases, scalars)
        del bases, scalars
    if args.ntt:
        ntt = DeviceNtt(k)
        ntt.dif(random_fr_words(cp, args.ntt), args.ntt, ntt.default_root(args.ntt))
    cp.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
