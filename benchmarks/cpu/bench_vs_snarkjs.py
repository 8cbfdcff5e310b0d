"""cuzk against `snarkjs groth16 prove`, side by side in one run, on the same circom circuit.

The circuit is tests/fixtures/circom's square chain with N = 65,536 quadratic constraints (BLS12-381),
so the zkey's domain is 2^17 (a power-17 ptau serves it). circom2 compiles it, snarkjs makes the ptau
and the zkey, circom's wasm makes the witness; then, alternating, each prover proves it `--reps` times:
  - snarkjs: `snarkjs groth16 prove` (whole command: node start-up, zkey read, proof);
  - cuzk CLI: `cuzk groth16 prove --zkey --wtns` (whole command: Python start-up, zkey read, proof);
  - snarkjs in-process: `snarkjs.groth16.prove` in one node process, zkey and witness in memory, curve
    built by an untimed first proof (snarkjs_prove_in_process.cjs);
  - cuzk in-process: the prover alone with the key already decoded (what the daemon does).
Whole commands are compared with whole commands, in-process provers with in-process provers.
Both cuzk rows run once per CPU MSM engine (blst, the default, and py-arkworks), so the engines are
compared in the same run too. Every proof is checked with `snarkjs groth16 verify`. Building the
power-17 ptau takes hours on 2 cores the first time; it is kept under benchmarks/_work/.

    python benchmarks/cpu/bench_vs_snarkjs.py --reps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import snarkjs_tools  # noqa: E402
from _common import envelope, write  # noqa: E402

from cuzk.curve.msm import ENGINE_ENV, msm_engine, prepare_bases  # noqa: E402
from cuzk.groth16.formats.circom import circom_key  # noqa: E402
from cuzk.groth16.formats.wtns import read_wtns  # noqa: E402
from cuzk.groth16.formats.zkey import read_zkey  # noqa: E402
from cuzk.groth16.prover import prove  # noqa: E402

WORK = Path(__file__).resolve().parents[1] / "_work"


ENGINES = ("blst", "arkworks")


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO, env=env)
    return time.perf_counter() - start


def prove_with(engine: str, key, asg) -> float:
    os.environ[ENGINE_ENV] = engine
    try:
        start = time.perf_counter()
        prove(key.pk, asg)
        return time.perf_counter() - start
    finally:
        del os.environ[ENGINE_ENV]


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
    for engine in ENGINES:
        os.environ[ENGINE_ENV] = engine
        for bases in (key.pk.h, key.pk.l, key.pk.a, key.pk.b_g1, key.pk.b_g2):
            prepare_bases(bases)
        del os.environ[ENGINE_ENV]
    asg = key.assignment(read_wtns(paths.wtns))

    in_process = ["node", str(Path(__file__).with_name("snarkjs_prove_in_process.cjs")), str(REPO), str(paths.zkey),
                  str(paths.wtns), "1"]
    samples: dict[str, list[float]] = {"snarkjs_cli": [], "snarkjs_in_process": []}
    for engine in ENGINES:
        samples[f"cuzk_cli_{engine}"] = []
        samples[f"cuzk_prove_{engine}"] = []
    for i in range(args.reps):
        sj = (out / f"snarkjs-{i}.json", out / f"snarkjs-public-{i}.json")
        samples["snarkjs_cli"].append(timed([*snarkjs_cli, str(sj[0]), str(sj[1])]))
        run = subprocess.run(in_process, check=True, capture_output=True, text=True, cwd=REPO)
        samples["snarkjs_in_process"].extend(json.loads(run.stdout)["samples_s"])
        produced = [sj]
        for engine in ENGINES:
            cz = (out / f"cuzk-{engine}-{i}.json", out / f"cuzk-{engine}-public-{i}.json")
            samples[f"cuzk_cli_{engine}"].append(timed([*cuzk_cli, "--proof", str(cz[0]), "--public", str(cz[1])],
                                                       env={**os.environ, ENGINE_ENV: engine}))
            samples[f"cuzk_prove_{engine}"].append(prove_with(engine, key, asg))
            produced.append(cz)
        for proof, public in produced:
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
        "default_msm_engine": msm_engine(),
        "speedup_cli": {e: med["snarkjs_cli"] / med[f"cuzk_cli_{e}"] for e in ENGINES},
        "speedup_in_process": {e: med["snarkjs_in_process"] / med[f"cuzk_prove_{e}"] for e in ENGINES},
        "blst_over_arkworks": {kind: med[f"cuzk_{kind}_arkworks"] / med[f"cuzk_{kind}_blst"]
                               for kind in ("cli", "prove")},
        "all_proofs_verified_by_snarkjs": True,
    }
    for k, v in med.items():
        print(f"{k:12s} {v:7.2f} s")
    for e in ENGINES:
        print(f"speed-up with {e}: {result['speedup_cli'][e]:.2f}x (whole commands), "
              f"{result['speedup_in_process'][e]:.2f}x (in-process provers)")
    path = write("vs-snarkjs-cpu", envelope("vs-snarkjs-cpu", result, reps=args.reps), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
