"""Compiling a Filecoin partition circuit block by block (`cuzk.r1cs.blocks`) against recording it whole.

Every case runs in a fresh spawned process, so that its peak resident memory (`peak_rss_bytes`,
VmHWM) and its growth over the process after imports (`peak_over_start_bytes`) are its own:

* `full:<id>`: `compile_circuit(blank, id, blocks=False)`, the whole blank circuit through
  `RecordingCS` then `compile_matrices`;
* `blocks:<id>`: `compile_circuit_blocks`, recordings of the one- and two-block versions then the
  numpy assembly of all blocks; its fingerprint must equal `full:<id>`'s when both ran;
* `check:porep-32g`: block-compile the production 32GiB PoRep partition, make the witness of a
  random well-formed 32GiB partition (`random_stacked_circuit` + `porep_witness`), evaluate
  a, b, c over every row (in row chunks, so that a, b, c need not all be resident) and check
  a·b = c. A random partition is not a sealed sector: its Merkle paths cannot reach the
  commitments, so exactly the rows that equate a computed root with a commitment fail (comm_r's
  in the header, 17 per challenge: tree_d, 14 parent columns, tree_r_last, own column). The check
  asserts that the failing rows are those: the same offsets in every challenge, 1 + 17·18 of them,
  each touching a commitment variable; every other row, ~130M, must hold.
* `check:snap-32g` (or another SnapDeals id): the same with a random SnapDeals partition
  (`random_snap` of bench_post_witness.py + `snap_witness`). The rows that must fail: in the header
  comm_r_old and comm_r_new against Poseidon(comm_c, root) and the apex root against comm_d_new;
  per challenge the tree_r_old and tree_r_new roots and the tree_d opening's end against the
  selected apex leaf: 3 + 3·challenges, at the same offsets in every challenge. The whole SnapDeals-32GiB
  recording (81M rows, ~18 GB at ~224 bytes per row) does not fit this 24 GB box shared with other
  jobs, so this check is what stands for it there.

    python benchmarks/cpu/bench_compile_blocks.py                    # porep-2k full vs blocks, wpost/winning
    python benchmarks/cpu/bench_compile_blocks.py --cases blocks:porep-32g check:porep-32g
    python benchmarks/cpu/bench_compile_blocks.py --cases full:snap-8m blocks:snap-8m check:snap-32g
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

DEFAULT_CASES = ("full:winning-2k", "blocks:winning-2k", "full:wpost-2k", "blocks:wpost-2k", "full:porep-2k",
                 "blocks:porep-2k")
_CHUNK_ROWS = 1 << 23


def _rss() -> tuple[int, int]:
    """(current, peak) resident bytes of this process."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def _compile(kind: str, circuit_id: str) -> tuple[Any, Any]:
    """The compiled circuit and, for block compilation, its `BlockLayout` (what
    `compile_circuit_blocks` does, step by step, to keep the layout)."""
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.groth16.synthesis import compile_circuit, record_block_versions, synthesis_code_digest
    from cuzk.r1cs.blocks import block_layout, block_versions, compile_blocks

    circuit = blank_circuit(circuit_id)
    if kind == "full":
        return compile_circuit(circuit, circuit_id, blocks=False), None
    versions = block_versions(circuit)
    if versions is None:
        raise SystemExit(f"{circuit_id} is not compiled block by block")
    one, two, moving = record_block_versions(versions)
    compiled = compile_blocks(one, two, versions.blocks, circuit_id, code_digest=synthesis_code_digest(),
                              per_block_header_aux=moving)
    return compiled, block_layout(one, two)


def _summary(compiled: Any) -> dict[str, Any]:
    return {"fingerprint": compiled.fingerprint, "num_constraints": compiled.num_constraints,
            "num_inputs": compiled.num_inputs, "num_aux": compiled.num_aux, "nnz": compiled.nnz,
            "compiled_bytes": compiled.nbytes}


def run_case(case: str) -> dict[str, Any]:
    """One case in this (fresh) process; see the module docstring."""
    kind, _, circuit_id = case.partition(":")
    import cuzk.groth16.synthesis  # noqa: F401  (imports out of the measured growth)

    start_rss, _ = _rss()
    t0 = time.perf_counter()
    compiled, layout = _compile("full" if kind == "full" else "blocks", circuit_id)
    out: dict[str, Any] = {"case": case, "compile_s": time.perf_counter() - t0, **_summary(compiled)}
    if layout is not None:
        out.update(header_rows=layout.header_rows, block_rows=layout.block_rows, header_aux=layout.header_aux,
                   block_aux=layout.block_aux)
    _, peak = _rss()
    out.update(start_rss_bytes=start_rss, compile_peak_rss_bytes=peak)
    if kind == "check":
        out.update(_check_random_partition(compiled, layout, circuit_id))
    _, peak = _rss()
    out.update(peak_rss_bytes=peak, peak_over_start_bytes=peak - start_rss)
    return out


def _check_random_partition(compiled: Any, layout: Any, circuit_id: str) -> dict[str, Any]:
    import numpy as np

    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.circuits.filecoin.porep import random_stacked_circuit
    from cuzk.circuits.filecoin.porep_witness import porep_witness
    from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit
    from cuzk.r1cs.blocks import block_versions
    from cuzk.r1cs.spmv import check_rows, spmv_table

    blank = blank_circuit(circuit_id)
    config = blank.config  # type: ignore[attr-defined]
    snap = isinstance(blank, EmptySectorUpdateCircuit)
    if snap:
        from bench_post_witness import random_snap

        circuit = random_snap(config, seed=1)
    else:
        circuit = random_stacked_circuit(config, seed=1)
    t0 = time.perf_counter()
    inputs, aux = circuit.witness_arrays() if snap else porep_witness(circuit)
    witness_s = time.perf_counter() - t0
    _, witness_peak = _rss()

    t0 = time.perf_counter()
    rows = compiled.num_constraints
    bad: list[np.ndarray] = []
    table, canonical = compiled.coeff_table, compiled.coeff_table_canonical
    for r0 in range(0, rows, _CHUNK_ROWS):
        r1 = min(rows, r0 + _CHUNK_ROWS)
        abc = [spmv_table(m.row_ptr[r0:r1 + 1], m.cols, m.coeff_idx, table, inputs, aux, table_canonical=canonical)
               for m in (compiled.a, compiled.b, compiled.c)]
        bad.append(check_rows(*abc) + r0)
        del abc
    bad_rows = np.concatenate(bad)
    check_s = time.perf_counter() - t0
    _, check_peak = _rss()

    # Which rows are expected to fail: those equating a root with a commitment, at the same offsets per block.
    versions = block_versions(blank)
    assert versions is not None
    header_bad = bad_rows[bad_rows < layout.header_rows]
    in_blocks = bad_rows[(bad_rows >= layout.header_rows) & (bad_rows < rows - compiled.num_inputs)]
    rel = (in_blocks - layout.header_rows) % layout.block_rows
    block_of = (in_blocks - layout.header_rows) // layout.block_rows
    per_block = [np.sort(rel[block_of == k]) for k in range(versions.blocks)]
    same_offsets = all(np.array_equal(p, per_block[0]) for p in per_block)
    if snap:
        expected = 3 + 3 * versions.blocks
        ok = (bad_rows.size == expected and header_bad.size == 3 and same_offsets
              and in_blocks.size == bad_rows.size - 3)
        return {"witness_s": witness_s, "witness_peak_rss_bytes": witness_peak, "evaluate_and_check_s": check_s,
                "check_peak_rss_bytes": check_peak, "rows_checked": rows, "unsatisfied_rows": int(bad_rows.size),
                "unsatisfied_expected": expected, "unsatisfied_in_header": int(header_bad.size),
                "unsatisfied_same_offsets_per_challenge": bool(same_offsets),
                "satisfied_rows": int(rows - bad_rows.size), "check_passed": bool(ok)}
    commitments = {circuit.comm_d, circuit.comm_r, circuit.comm_c, circuit.comm_r_last}
    commitment_aux = {j for j in range(layout.header_aux)
                      if int.from_bytes(aux[j].astype("<u8").tobytes(), "little") in commitments}
    commitment_cols = np.array(sorted(compiled.num_inputs + j for j in commitment_aux), dtype=np.uint32)

    def touches_commitment(row: int) -> bool:
        return any(np.isin(m.cols[int(m.row_ptr[row]):int(m.row_ptr[row + 1])], commitment_cols).any()
                   for m in (compiled.a, compiled.b, compiled.c))

    all_touch = all(touches_commitment(int(r)) for r in bad_rows)
    expected = 1 + 17 * versions.blocks
    ok = (bad_rows.size == expected and header_bad.size == 1 and same_offsets and all_touch
          and in_blocks.size == bad_rows.size - 1)
    return {"witness_s": witness_s, "witness_peak_rss_bytes": witness_peak, "evaluate_and_check_s": check_s,
            "check_peak_rss_bytes": check_peak, "rows_checked": rows, "unsatisfied_rows": int(bad_rows.size),
            "unsatisfied_expected": expected, "unsatisfied_same_offsets_per_challenge": bool(same_offsets),
            "unsatisfied_all_touch_a_commitment": bool(all_touch), "commitment_aux": sorted(commitment_aux),
            "satisfied_rows": int(rows - bad_rows.size), "check_passed": bool(ok)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES),
                        help="full:<id>, blocks:<id>, check:porep-32g, check:snap-<size>")
    parser.add_argument("--out", type=Path, help="result JSON (default results/compile-blocks-<date>.json)")
    args = parser.parse_args()
    results = []
    ctx = multiprocessing.get_context("spawn")
    for case in args.cases:
        with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            result = pool.submit(run_case, case).result()
        results.append(result)
        print({k: v for k, v in result.items() if k != "commitment_aux"}, flush=True)
    by_case = {r["case"]: r for r in results}
    for r in results:
        kind, _, cid = r["case"].partition(":")
        full = by_case.get(f"full:{cid}")
        if kind != "full" and full is not None:
            r["equals_full_recording"] = r["fingerprint"] == full["fingerprint"]
            if not r["equals_full_recording"]:
                raise SystemExit(f"{r['case']}: fingerprint differs from the full recording")
    print(write("compile-blocks", envelope("bench_compile_blocks", results), args.out))


if __name__ == "__main__":
    main()
