"""A 32GiB PoRep partition's synthesis: the witness, then a = A·w, b = B·w, c = C·w on the CPU and on the GPU.

Steps (one process, after the numba and CUDA kernels are warmed up on a 2KiB partition):

1. compile porep-32g block by block (`cuzk.r1cs.blocks`): its one- and two-challenge versions are
   recorded in two processes at once (the recordings are independent), then the 18-challenge
   arrays are assembled; `compile_s` is the wall time of both steps;
2. the witness of a random well-formed partition (`random_stacked_circuit` + `porep_witness`, all
   cores): `witness_s`, median of `--reps` runs;
3. CPU: `CompiledCircuit.evaluate` (the numba SpMV, all cores), median of `--reps`; the witness plus
   this is the CPU compiled path;
4. GPU (`cuzk.backends.cuda.spmv`): the matrices uploaded once through the CUDA backend's pinned
   uploader (`csr_upload_s`, the long-row lists included), the witness uploaded (`witness_upload_s`),
   then the three products into resident buffers, timed with CUDA events: one warm-up, then
   `--gpu-reps` runs (median, and A / B / C apart); the witness and a·b = c checks on the device;
5. equality: the GPU's a, b, c are brought back and compared with the CPU's (array equality and a
   BLAKE2b digest of each); the device row check must find exactly the rows the CPU check finds (a
   random partition fails its 307 commitment rows: benchmarks/cpu/bench_compile_blocks.py).

`--wait-file PATH` waits (up to 10 minutes) for PATH to exist before step 2, so that other work sharing
the machine during the compile (a test run, say) stays out of the timings.

    python benchmarks/cuda/bench_cuda_synthesis.py --json results/cuda-synthesis-h200-<date>.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import hashlib
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write


def _record(circuit_id: str, which: str) -> tuple[Any, float]:
    """The one- or two-block recording of a block circuit (in a child process) and its seconds."""
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.groth16.synthesis import record_circuit
    from cuzk.r1cs.blocks import block_versions

    start = time.perf_counter()
    versions = block_versions(blank_circuit(circuit_id))
    assert versions is not None
    return record_circuit(getattr(versions, which)), time.perf_counter() - start


def compile_parallel(circuit_id: str) -> tuple[Any, dict[str, float]]:
    """`compile_circuit_blocks`, with the two recordings in two processes at once."""
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.groth16.synthesis import synthesis_code_digest
    from cuzk.r1cs.blocks import block_versions, compile_blocks

    start = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {which: pool.submit(_record, circuit_id, which) for which in ("one", "two")}
        (one, one_s), (two, two_s) = futures["one"].result(), futures["two"].result()
    recorded = time.perf_counter()
    versions = block_versions(blank_circuit(circuit_id))
    assert versions is not None
    compiled = compile_blocks(one, two, versions.blocks, circuit_id, code_digest=synthesis_code_digest())
    done = time.perf_counter()
    return compiled, {"record_one_s": one_s, "record_two_s": two_s, "record_wall_s": recorded - start,
                      "assemble_s": done - recorded, "compile_s": done - start}


def warm_up() -> dict[str, Any]:
    """numba kernels (witness generators, SpMV, row check) and the synthesis kernel unit, on porep-2k's
    shape; the seconds the unit took to load (NVRTC, or a cubin from the kernel cache)."""
    from cuzk.backends.cuda.module import get_module
    from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit
    from cuzk.r1cs.spmv import check_rows, spmv_table

    inputs, aux = random_stacked_circuit(PRODUCTION_CONFIGS[2 << 10]).witness_arrays()
    ptr = np.array([0, 1, 2], dtype=np.uint32)
    table = np.zeros((2, 4), dtype=np.uint64)
    table[0, 0] = table[1, 0] = 1
    for idx in (np.zeros(2, dtype=np.uint16), np.zeros(2, dtype=np.uint32)):
        out = spmv_table(ptr, np.array([0, 1], dtype=np.uint32), idx, table, inputs[:1], aux[:1])
    check_rows(out, out, out)
    start = time.perf_counter()
    module = get_module(0, "synthesis")
    return {"synthesis_unit_load_s": time.perf_counter() - start, "synthesis_unit_source": module.source}


def digest(arr: np.ndarray) -> str:
    h = hashlib.blake2b(digest_size=16)
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    for lo in range(0, flat.size, 1 << 26):
        h.update(memoryview(flat[lo:lo + (1 << 26)]))
    return h.hexdigest()


def timed_median(fn: Any, reps: int) -> tuple[float, list[float], Any]:
    samples, out = [], None
    for _ in range(reps):
        del out
        gc.collect()
        start = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples, out


def row_stats(compiled: Any, long_row: int) -> dict[str, Any]:
    out = {}
    for name, mat in (("A", compiled.a), ("B", compiled.b), ("C", compiled.c)):
        lengths = np.diff(mat.row_ptr.astype(np.int64))
        long = lengths > long_row
        out[name] = {"nnz": int(mat.nnz), "max_row": int(lengths.max()), "long_rows": int(long.sum()),
                     "long_row_entries_share": float(lengths[long].sum() / max(mat.nnz, 1)),
                     "coeff_idx_dtype": str(mat.coeff_idx.dtype), "row_ptr_dtype": str(mat.row_ptr.dtype)}
    return out


def gpu_phase(compiled: Any, inputs: np.ndarray, aux: np.ndarray, reps: int, cpu_abc: list[np.ndarray],
              cpu_bad: np.ndarray) -> dict[str, Any]:
    import cupy as cp

    from cuzk.backends.cuda.module import get_module
    from cuzk.backends.cuda.spmv import DeviceSpmv
    from cuzk.backends.cuda.uploader import PinnedUploader

    stream = cp.cuda.Stream(non_blocking=True)
    uploader = PinnedUploader(cp, stream)
    spmv = DeviceSpmv(get_module(0, "synthesis"))

    def copy(host: np.ndarray) -> Any:
        dst = cp.empty(host.shape, dtype=host.dtype)
        cp.cuda.Device().synchronize()
        if host.nbytes:
            uploader.upload(dst, host)
        stream.synchronize()
        return dst

    result: dict[str, Any] = {"long_row": spmv.long_row, "long_row_threads": spmv.long_row_threads}
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    prepared = spmv.prepare(compiled, True, copy)
    cp.cuda.Device().synchronize()
    result["csr_upload_s"] = time.perf_counter() - start
    result["csr_device_bytes"] = prepared.nbytes
    result["long_rows_found"] = {n: int(m.long_rows.shape[0]) for n, m in zip("ABC", prepared.matrices, strict=True)}

    start = time.perf_counter()
    dev_in = copy(inputs.view(np.uint32).reshape(-1, 8))
    dev_aux = copy(aux.view(np.uint32).reshape(-1, 8))
    result["witness_upload_s"] = time.perf_counter() - start
    result["witness_bytes"] = int(inputs.nbytes + aux.nbytes)

    rows = compiled.num_constraints
    out = [cp.empty((rows, 8), dtype=cp.uint32) for _ in range(3)]
    spmv.evaluate(prepared, dev_in, dev_aux, out)  # warm-up
    cp.cuda.Device().synchronize()
    totals, parts = [], {n: [] for n in "ABC"}
    for _ in range(reps):
        events = [cp.cuda.Event() for _ in range(4)]
        events[0].record()
        for k, (mat, dst) in enumerate(zip(prepared.matrices, out, strict=True)):
            spmv.multiply(mat, prepared, dev_in, dev_aux, dst)
            events[k + 1].record()
        events[3].synchronize()
        totals.append(cp.cuda.get_elapsed_time(events[0], events[3]) / 1e3)
        for k, n in enumerate("ABC"):
            parts[n].append(cp.cuda.get_elapsed_time(events[k], events[k + 1]) / 1e3)
    # the same through evaluate (host wall, synchronised), as a prover calls it
    wall, wall_samples, _ = timed_median(
        lambda: (spmv.evaluate(prepared, dev_in, dev_aux, out), cp.cuda.Device().synchronize()), reps)
    result.update(spmv_s=statistics.median(totals), spmv_samples_s=totals,
                  spmv_per_matrix_s={n: statistics.median(v) for n, v in parts.items()},
                  evaluate_wall_s=wall, evaluate_wall_samples_s=wall_samples)

    start = time.perf_counter()
    spmv.check_witness(dev_in, dev_aux)
    result["check_witness_s"] = time.perf_counter() - start
    start = time.perf_counter()
    gpu_bad = spmv.unsatisfied_rows(*out)
    result["check_rows_s"] = time.perf_counter() - start
    result["unsatisfied_rows"] = int(gpu_bad.size)
    result["unsatisfied_rows_equal_cpu"] = bool(np.array_equal(gpu_bad, cpu_bad))

    equal, digests = {}, {}
    for name, dev, ref in zip("abc", out, cpu_abc, strict=True):
        host = cp.asnumpy(dev).view(np.uint64).reshape(-1, 4)
        equal[name] = bool(np.array_equal(host, ref))
        digests[name] = digest(host)
        del host
    result["equal_to_cpu"] = equal
    result["gpu_digests"] = digests
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--circuit", default="porep-32g", help="a PoRep circuit id (porep-2k for a quick run)")
    ap.add_argument("--reps", type=int, default=3, help="CPU runs of the witness and of the SpMV (median)")
    ap.add_argument("--gpu-reps", type=int, default=7, help="timed GPU SpMV runs after one warm-up (median)")
    ap.add_argument("--wait-file", type=Path, help="wait for this file to exist before the timed steps")
    ap.add_argument("--note", default="", help="free text stored with the results")
    ap.add_argument("--json", type=Path, help="output file (default: results/cuda-synthesis-<date>.json)")
    args = ap.parse_args()
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.circuits.filecoin.porep import random_stacked_circuit
    from cuzk.circuits.filecoin.porep_witness import porep_witness
    from cuzk.r1cs.spmv import check_rows

    t0 = time.perf_counter()
    log = {}

    def stamp(what: str) -> None:
        log[what] = round(time.perf_counter() - t0, 2)
        print(f"[{log[what]:7.1f} s] {what}", flush=True)

    with cf.ThreadPoolExecutor(max_workers=1) as warm:
        warming = warm.submit(warm_up)  # overlaps the recordings (numba compiles on this process's cores)
        compiled, compile_times = compile_parallel(args.circuit)
        unit = warming.result()
    stamp(f"compiled {args.circuit}: {compiled.num_constraints:,} rows, {compiled.nnz:,} entries, "
          f"{compile_times['compile_s']:.1f} s")
    if args.wait_file is not None:
        deadline = time.monotonic() + 600
        while not args.wait_file.exists() and time.monotonic() < deadline:
            time.sleep(1)
        stamp(f"wait file {'found' if args.wait_file.exists() else 'NOT found'}")

    from cuzk.backends.cuda.spmv import LONG_ROW

    config = blank_circuit(args.circuit).config  # type: ignore[attr-defined]
    circuit = random_stacked_circuit(config, seed=1)
    witness_s, witness_samples, (inputs, aux) = timed_median(lambda: porep_witness(circuit), args.reps)
    stamp(f"witness {witness_s:.3f} s")
    cpu_s, cpu_samples, cpu_abc = timed_median(lambda: compiled.evaluate(inputs, aux), args.reps)
    stamp(f"CPU SpMV {cpu_s:.3f} s")
    start = time.perf_counter()
    cpu_bad = check_rows(*cpu_abc)
    cpu_check_s = time.perf_counter() - start
    cpu_digests = {name: digest(v) for name, v in zip("abc", cpu_abc, strict=True)}
    stamp(f"CPU check {cpu_check_s:.3f} s: {cpu_bad.size} unsatisfied rows")

    gpu = gpu_phase(compiled, inputs, aux, args.gpu_reps, list(cpu_abc), cpu_bad)
    stamp(f"GPU SpMV {gpu['spmv_s'] * 1e3:.1f} ms, equal {gpu['equal_to_cpu']}")
    gpu["digests_equal_cpu"] = gpu["gpu_digests"] == cpu_digests

    result = {
        "circuit_id": args.circuit, "constraints": compiled.num_constraints, "inputs": compiled.num_inputs,
        "aux": compiled.num_aux, "nnz": compiled.nnz, "compiled_bytes": compiled.nbytes,
        "fingerprint": compiled.fingerprint, "rows": row_stats(compiled, LONG_ROW), **compile_times, **unit,
        "witness": f"random_stacked_circuit({args.circuit}'s config, seed 1) + porep_witness",
        "witness_s": witness_s, "witness_samples_s": witness_samples,
        "cpu_spmv_s": cpu_s, "cpu_spmv_samples_s": cpu_samples, "cpu_check_s": cpu_check_s,
        "cpu_unsatisfied_rows": int(cpu_bad.size), "cpu_digests": cpu_digests,
        "cpu_compiled_path_s": witness_s + cpu_s,
        "gpu": gpu,
        "gpu_synthesis_s": witness_s + gpu["spmv_s"],
        "gpu_synthesis_with_witness_upload_s": witness_s + gpu["witness_upload_s"] + gpu["spmv_s"],
        "target_gpu_synthesis_s": 0.5,
        "log_s": log,
    }
    print(f"{args.circuit}: witness {witness_s:.3f} s (CPU, {os.cpu_count()} cores); SpMV CPU {cpu_s:.3f} s, "
          f"GPU {gpu['spmv_s'] * 1e3:.1f} ms (A/B/C " + " / ".join(f"{v * 1e3:.1f}" for v in
                                                         gpu["spmv_per_matrix_s"].values())
          + f" ms); CSR upload {gpu['csr_upload_s']:.2f} s; witness upload {gpu['witness_upload_s']:.3f} s; "
          f"witness + GPU SpMV {result['gpu_synthesis_s']:.3f} s; GPU == CPU: {gpu['equal_to_cpu']}, "
          f"digests {gpu['digests_equal_cpu']}; unsatisfied {gpu['unsatisfied_rows']} (CPU {cpu_bad.size})",
          flush=True)
    import numba

    payload = envelope("cuda-synthesis", result, reps=args.reps, gpu_reps=args.gpu_reps,
                       numba_threads=numba.get_num_threads(), note=args.note)
    print(write("cuda-synthesis", payload, args.json))


if __name__ == "__main__":
    main()
