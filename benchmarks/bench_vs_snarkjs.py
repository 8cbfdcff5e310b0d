"""cuzk against `snarkjs groth16 prove`, side by side in one run, on the same circom circuit.

The circuit is tests/fixtures/circom's square chain with N = 65,536 quadratic constraints (BLS12-381),
so the zkey's domain is 2^17 (a power-17 ptau serves it). circom2 compiles it, snarkjs makes the ptau
and the zkey, circom's wasm makes the witness; then, alternating, each prover proves it `--reps` times:
  - snarkjs: `snarkjs groth16 prove` (whole command: node start-up, zkey read, proof);
  - cuzk CLI: `cuzk groth16 prove --zkey --wtns` (whole command: Python start-up, zkey read, proof);
  - cuzk in-process: the prover alone with the key already decoded (what the daemon does).
Every proof is checked with `snarkjs groth16 verify`. Building the power-17 ptau takes hours on 2 cores
the first time; it is kept under benchmarks/_work/.

    python benchmarks/bench_vs_snarkjs.py --reps 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).parent))
import snarkjs_tools  # noqa: E402
from _common import envelope, write  # noqa: E402

from cuzk.groth16.circom import circom_key  # noqa: E402
from cuzk.groth16.prover import prove  # noqa: E402
from cuzk.groth16.wtns import read_wtns  # noqa: E402
from cuzk.groth16.zkey import read_zkey  # noqa: E402

WORK = Path(__file__).parent / "_work"


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=65536, help="quadratic constraints in the square chain")
    ap.add_argument("--ptau-power", type=int, default=17)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    t0 = time.perf_counter()
    ptau = snarkjs_tools.build_ptau(WORK / "ptau", args.ptau_power)
    circuit = snarkjs_tools.write_square_chain(WORK / f"chain{args.n}", args.n)
    paths = snarkjs_tools.build_circom_fixture(circuit, WORK / f"chain{args.n}", ptau_power=args.ptau_power,
                                               input={"x": "3"}, ptau=ptau)
    setup_s = time.perf_counter() - t0
    out = WORK / f"chain{args.n}" / "runs"
    out.mkdir(exist_ok=True)

    snarkjs_cli = ["node", str(snarkjs_tools.SNARKJS_CLI), "groth16", "prove", str(paths.zkey), str(paths.wtns)]
    cuzk_cli = [str(Path(sys.executable).with_name("cuzk")), "groth16", "prove", "--zkey", str(paths.zkey),
                "--wtns", str(paths.wtns)]
    key = circom_key(read_zkey(paths.zkey))
    for bases in (key.pk.h, key.pk.l, key.pk.a, key.pk.b_g1, key.pk.b_g2):
        bases.points()
    asg = key.assignment(read_wtns(paths.wtns))

    samples: dict[str, list[float]] = {"snarkjs_cli": [], "cuzk_cli": [], "cuzk_prove": []}
    for i in range(args.reps):
        sj = (out / f"snarkjs-{i}.json", out / f"snarkjs-public-{i}.json")
        samples["snarkjs_cli"].append(timed([*snarkjs_cli, str(sj[0]), str(sj[1])]))
        cz = (out / f"cuzk-{i}.json", out / f"cuzk-public-{i}.json")
        samples["cuzk_cli"].append(timed([*cuzk_cli, "--proof", str(cz[0]), "--public", str(cz[1])]))
        start = time.perf_counter()
        prove(key.pk, asg)
        samples["cuzk_prove"].append(time.perf_counter() - start)
        for proof, public in (sj, cz):
            if not snarkjs_tools.snarkjs_verify(paths.vk_json, public, proof):
                raise SystemExit(f"{proof} does not verify")
    med = {k: statistics.median(v) for k, v in samples.items()}
    result = {
        "circuit": f"square_chain N={args.n}",
        "constraints": args.n,
        "domain_size": key.zkey.domain_size,
        "setup_s": setup_s,
        "median_s": med,
        "samples_s": samples,
        "speedup_cli": med["snarkjs_cli"] / med["cuzk_cli"],
        "speedup_prove_only": med["snarkjs_cli"] / med["cuzk_prove"],
        "all_proofs_verified_by_snarkjs": True,
    }
    for k, v in med.items():
        print(f"{k:12s} {v:7.2f} s")
    print(f"speed-up: {result['speedup_cli']:.2f}x (whole commands), {result['speedup_prove_only']:.2f}x (prover only)")
    path = write("vs-snarkjs-cpu", envelope("vs-snarkjs-cpu", result, reps=args.reps), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
