"""Poseidon gadget synthesis speed: µs per hash and rows/s on ShapeCS and ProvingAssignment.

A 32GiB PoRep partition synthesises ~3,000 Poseidon hashes, so the gadget's per-row cost matters
next to SHA-256's. Three contenders are timed side by side, alternating within each repetition so
that all see the same machine state:

* ``before``: the first, straightforward gadget, kept frozen in tests/gadgets/test_poseidon_gadget.py
  as ``_reference_poseidon_hash_circuit`` (the oracle the bit-identity tests compare against);
* ``after``: ``cuzk.gadgets.poseidon.poseidon_hash_circuit``;
* ``back end alone``: the same back end replaying the identical alloc/enforce calls of one hash,
  captured beforehand with their LinearCombinations already built. No gadget can emit these rows
  for less, so it shows how much of ``after`` is the gadget's own work and how much the back end's.

Each sample synthesises ``--hashes`` (after, back end alone) or ``--before-hashes`` (before)
consecutive hashes into one fresh constraint system, after one untimed warm-up hash (which also
builds the gadget's cached templates and loads its compiled witness kernel). Figures are medians
over ``--reps`` samples. Both clocks are recorded: process CPU time (the printed figures; on a
shared machine it is what stays reproducible, since time spent descheduled is not counted) and wall
time (in the JSON; the speed-up it gives is printed too).

    python benchmarks/witness/bench_poseidon_gadget.py --reps 5 --json /tmp/poseidon.json
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import envelope, write

from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.poseidon import PoseidonOutput, poseidon_hash_circuit
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.r1cs import ConstraintSystem, LinearCombination, ProvingAssignment, RecordingCS, ShapeCS, Variable
from cuzk.r1cs.system import Annotation, Value

REPO = Path(__file__).resolve().parents[2]
HashFn = Callable[..., PoseidonOutput]
Replay = list[tuple[Annotation, Value, Annotation, LinearCombination, LinearCombination, LinearCombination]]
BACKENDS: dict[str, Callable[[], ConstraintSystem]] = {"ShapeCS": ShapeCS, "ProvingAssignment": ProvingAssignment}
CONTENDERS = ("before", "after", "back end alone")


def reference_gadget() -> HashFn:
    """The frozen pre-optimisation gadget, loaded from the test module by path (tests is no package)."""
    path = REPO / "tests" / "gadgets" / "test_poseidon_gadget.py"
    spec = importlib.util.spec_from_file_location("_poseidon_gadget_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._reference_poseidon_hash_circuit


class _CallCapture(RecordingCS):
    """Keeps each row's alloc and enforce arguments (every Poseidon row allocates, then enforces)."""

    def __init__(self) -> None:
        super().__init__(with_values=True)
        self.calls: Replay = []
        self._pending: tuple[Annotation, Value] | None = None

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self._pending = (annotation, value)
        return super().alloc(annotation, value)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        assert self._pending is not None
        self.calls.append((*self._pending, annotation, a, b, c))
        self._pending = None
        super().enforce(annotation, a, b, c)


def setup(make_cs: Callable[[], ConstraintSystem], arity: int) -> tuple[ConstraintSystem, list[Variable], list[int]]:
    """A fresh constraint system holding ONE and `arity` random inputs (the same for every contender)."""
    rng = random.Random(arity)
    values = [rng.randrange(R_MODULUS) for _ in range(arity)]
    cs = make_cs()
    cs.alloc_input("ONE", 1)
    return cs, [cs.alloc(f"x{i}", v) for i, v in enumerate(values)], values


def capture(arity: int) -> Replay:
    """One hash's calls, as the gadget makes them (the same on every back end)."""
    recorder = _CallCapture()
    _, inputs, values = setup(lambda: recorder, arity)
    poseidon_hash_circuit(recorder, inputs, poseidon_constants(arity), merkle_tree_tag(arity), values)
    return recorder.calls


def sample(contender: str, hash_fn: HashFn, replay: Replay, backend: str, arity: int,
           hashes: int) -> tuple[float, float, int]:
    """CPU and wall seconds for `hashes` hashes into a fresh constraint system, and the rows emitted."""
    cs, inputs, values = setup(BACKENDS[backend], arity)
    constants, tag = poseidon_constants(arity), merkle_tree_tag(arity)
    hash_values = values if cs.needs_values else None
    alloc, enforce = cs.alloc, cs.enforce
    cpu, wall = time.process_time(), time.perf_counter()
    if contender == "back end alone":
        for _ in range(hashes):
            for alloc_annotation, value, annotation, a, b, c in replay:
                alloc(alloc_annotation, value)
                enforce(annotation, a, b, c)
    else:
        for _ in range(hashes):
            hash_fn(cs, inputs, constants, tag, hash_values)
    return time.process_time() - cpu, time.perf_counter() - wall, cs.num_constraints


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arities", default="2,8,11", help="comma-separated arities (default 2,8,11)")
    ap.add_argument("--reps", type=int, default=5, help="samples per figure; the median is reported")
    ap.add_argument("--hashes", type=int, default=40, help="hashes per sample, optimised gadget and back end alone")
    ap.add_argument("--before-hashes", type=int, default=4, help="hashes per sample, frozen reference gadget")
    ap.add_argument("--json", type=Path, help="where to write the JSON record (default: results/)")
    args = ap.parse_args()

    gadgets = {"before": reference_gadget(), "after": poseidon_hash_circuit, "back end alone": poseidon_hash_circuit}
    counts = {"before": args.before_hashes, "after": args.hashes, "back end alone": args.hashes}
    results: list[dict[str, Any]] = []
    print(f"CPU time per hash, median of {args.reps}; speed-up = before / after (CPU, and wall clock)")
    print(f"{'arity':>5} {'back end':<18} {'before µs':>10} {'rows/s':>8} {'after µs':>9} {'rows/s':>8} "
          f"{'speed-up':>8} {'(wall)':>6} {'back end alone µs':>18}")
    for arity in (int(a) for a in args.arities.split(",")):
        replay = capture(arity)
        for backend in BACKENDS:
            for name in CONTENDERS:
                sample(name, gadgets[name], replay, backend, arity, 1)  # warm-up: constants, templates, kernel
            cpu: dict[str, list[float]] = {name: [] for name in CONTENDERS}
            wall: dict[str, list[float]] = {name: [] for name in CONTENDERS}
            for _ in range(args.reps):
                for name in CONTENDERS:
                    cpu_s, wall_s, rows = sample(name, gadgets[name], replay, backend, arity, counts[name])
                    assert rows == counts[name] * len(replay)
                    cpu[name].append(cpu_s / counts[name])
                    wall[name].append(wall_s / counts[name])
            row: dict[str, Any] = {"arity": arity, "backend": backend, "rows_per_hash": len(replay)}
            for name in CONTENDERS:
                per_hash, per_hash_wall = statistics.median(cpu[name]), statistics.median(wall[name])
                row[name] = {"us_per_hash": per_hash * 1e6, "rows_per_s": len(replay) / per_hash,
                             "wall_us_per_hash": per_hash_wall * 1e6, "wall_rows_per_s": len(replay) / per_hash_wall,
                             "cpu_samples_s_per_hash": cpu[name], "wall_samples_s_per_hash": wall[name]}
            before, after, alone = row["before"], row["after"], row["back end alone"]
            row["speedup"] = before["us_per_hash"] / after["us_per_hash"]
            row["wall_speedup"] = before["wall_us_per_hash"] / after["wall_us_per_hash"]
            results.append(row)
            print(f"{arity:>5} {backend:<18} {before['us_per_hash']:>10,.0f} {before['rows_per_s']:>8,.0f} "
                  f"{after['us_per_hash']:>9,.0f} {after['rows_per_s']:>8,.0f} {row['speedup']:>7.1f}x "
                  f"{row['wall_speedup']:>5.1f}x {alone['us_per_hash']:>18,.0f}", flush=True)
    path = write("poseidon-gadget", envelope("poseidon-gadget", results, reps=args.reps, hashes=args.hashes,
                                             before_hashes=args.before_hashes, clock="process_time",
                                             loadavg=os.getloadavg()), args.json)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
