"""Running a circuit the way bellperson's Groth16 generator and prover do.

Both allocate input 0 = ONE before the circuit runs and, afterwards, append one constraint per
input (A = input_i, B = 0, C = 0) so that every input lands in the A query and the inputs are
linearly independent. Published parameters depend on this exact order.

Two ways to the prover's `Assignment`: `synthesize_for_proving` (the constraint system evaluates
every row as it is emitted) and `synthesize_compiled` (the witness alone, from the circuit's batched
generator where it has one (`witness_arrays`), else from `WitnessCS`; then a = A·w, b = B·w,
c = C·w with a circuit compiled once by `compile_circuit`). Both give identical arrays; the second
replaces per-row Python work with a parallel sparse product.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from cuzk.r1cs import (
    Circuit,
    CircuitShape,
    ConstraintSystem,
    LinearCombination,
    ProvingAssignment,
    R1csMatrices,
    RecordingCS,
    ShapeCS,
    Variable,
    WitnessCS,
)

if TYPE_CHECKING:
    import numpy as np

    from cuzk.groth16.assignment import Assignment
    from cuzk.r1cs.blocks import BlockVersions
    from cuzk.r1cs.compiled import CompiledCircuit
    from cuzk.witness_gen.deferred import DeferredWitness


def _run(circuit: Circuit, cs: ConstraintSystem) -> None:
    cs.alloc_input("ONE", 1)
    circuit.synthesize(cs)
    for i in range(cs.num_inputs):
        cs.enforce("input constraint", LinearCombination.of(Variable.input(i)), LinearCombination(),
                   LinearCombination())


def synthesize_for_proving(circuit: Circuit, *, check: bool = False) -> ProvingAssignment:
    """Witness, A/B/C evaluations and densities; `check` verifies every row as it is emitted."""
    cs = ProvingAssignment(check=check)
    _run(circuit, cs)
    return cs


def record_circuit(circuit: Circuit, *, with_values: bool = False) -> R1csMatrices:
    """The circuit's A, B, C matrices (input constraints included), as key generation sees them."""
    cs = RecordingCS(with_values=with_values)
    _run(circuit, cs)
    return cs.matrices()


def circuit_shape(circuit: Circuit) -> CircuitShape:
    cs = ShapeCS()
    _run(circuit, cs)
    return cs.shape()


def synthesize_witness(circuit: Circuit) -> WitnessCS:
    """Inputs and aux exactly as `synthesize_for_proving` allocates them, without evaluating rows."""
    cs = WitnessCS()
    _run(circuit, cs)
    return cs


#: What decides a circuit's R1CS, relative to the `cuzk` package: a compiled circuit recorded by
#: other versions of these files may differ, so their digest is stamped into compiled files.
_SYNTHESIS_SOURCES = ("r1cs", "gadgets", "circuits", "hashes", "filecoin", "field/constants.py",
                      "groth16/synthesis.py")
#: Files under those that cannot change a recorded R1CS (the compiled form itself, and the circuits'
#: batched witness generators, which only compute values).
_NOT_SYNTHESIS = ("r1cs/compiled.py", "r1cs/compiled_file.py", "r1cs/spmv.py", "circuits/filecoin/post_witness.py",
                  "circuits/filecoin/snap_witness.py", "circuits/filecoin/porep_witness.py")


@cache
def synthesis_code_digest() -> str:
    """BLAKE2b-256 over the paths and contents of the synthesis sources (`_SYNTHESIS_SOURCES`).

    Any edit to a gadget, circuit or constraint system changes it, so a compiled file recorded
    before the edit is treated as stale instead of silently proving a different R1CS.
    """
    root = Path(__file__).resolve().parent.parent
    files: list[Path] = []
    for entry in _SYNTHESIS_SOURCES:
        path = root / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    h = hashlib.blake2b(digest_size=32)
    for path in files:
        rel = path.relative_to(root).as_posix()
        if rel in _NOT_SYNTHESIS:
            continue
        data = path.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


#: Block compilation records 1 + 2 blocks, so it pays from 3 blocks on (less memory at 3, less time beyond).
MIN_BLOCKS_TO_ASSEMBLE = 3


def compile_circuit(circuit: Circuit, circuit_id: str, *, blocks: bool = True,
                    parallel: bool = False) -> CompiledCircuit:
    """Record `circuit` (values are not needed: a blank circuit will do) into its compiled form,
    stamped with this code's `synthesis_code_digest`.

    A Filecoin circuit made of identical blocks (PoRep and SnapDeals challenges, PoSt sectors) of 3 or
    more is compiled block by block (`compile_circuit_blocks`, the same result); `blocks=False`
    records it whole; `parallel` records its one- and two-block versions in two processes at once.
    """
    from cuzk.r1cs.blocks import block_versions
    from cuzk.r1cs.compiled import compile_matrices

    versions = block_versions(circuit) if blocks else None
    if versions is not None and versions.blocks >= MIN_BLOCKS_TO_ASSEMBLE:
        return compile_circuit_blocks(circuit, circuit_id, parallel=parallel)
    return compile_matrices(record_circuit(circuit), circuit_id, code_digest=synthesis_code_digest())


def compile_circuit_blocks(circuit: Circuit, circuit_id: str, *, parallel: bool = False) -> CompiledCircuit:
    """The compiled form of a circuit made of identical blocks, from recordings of its one- and
    two-block versions (`cuzk.r1cs.blocks`): bit-identical to recording it whole, at the cost of
    three blocks. CuzkError when the circuit is not one of those (`cuzk.r1cs.blocks.block_versions`)."""
    from cuzk.errors import CuzkError
    from cuzk.r1cs.blocks import block_versions, compile_blocks

    versions = block_versions(circuit)
    if versions is None:
        raise CuzkError(f"{circuit_id}: {type(circuit).__name__} is not a circuit of identical blocks")
    one, two, moving = record_block_versions(versions, parallel=parallel)
    return compile_blocks(one, two, versions.blocks, circuit_id, code_digest=synthesis_code_digest(),
                          per_block_header_aux=moving)


def record_block_versions(versions: BlockVersions, *, parallel: bool = False,
                          ) -> tuple[R1csMatrices, R1csMatrices, np.ndarray | None]:
    """The one- and two-block recordings of a block circuit's small versions (the one-block one
    recorded, or cut from the two-block one) and the per-block header table where it has one.

    Recording is single-threaded Python; with `parallel` the one-block version is recorded in a
    spawned process while this one records the two-block version (porep-32g: the one-block
    recording is a third of the recording time), at the cost of a process start and of both
    recordings' working sets at once."""
    from cuzk.errors import CuzkError

    if versions.one is None and versions.first_block is None:
        raise CuzkError("block versions without a one-block circuit must say how to cut it from two blocks")
    if parallel and versions.one is not None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pending = pool.submit(record_circuit, versions.one)
            two = record_circuit(versions.two)
            one = pending.result()
    else:
        two = record_circuit(versions.two)
        one = record_circuit(versions.one) if versions.one is not None else versions.first_block(two)
    moving = None if versions.per_block_header_aux is None else versions.per_block_header_aux()
    return one, two, moving


def generated_witness(circuit: Circuit, aux_out: np.ndarray | None = None,
                      deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(inputs, aux) canonical limbs from the circuit's own batched witness generator (a
    `witness_arrays()` method, as the Filecoin circuits have), or None when it has none.

    `aux_out`, for a circuit that states its counts (`generated_witness_shape`), is the
    (num_aux, 4) uint64 array the generator fills and returns as aux (a shared-memory segment, so
    the hand-off to the prover copies nothing).

    `deferred`, for a circuit that `defers_witness`, receives its bulk gadgets, whose aux rows are
    left unwritten (`cuzk.witness_gen.deferred`); ValueError for one that does not.

    The generator must equal `synthesize_witness` element by element; its tests hold it to that,
    and the compiled path's row check refuses any witness that does not satisfy the circuit.
    """
    generate = getattr(circuit, "witness_arrays", None)
    if generate is None:
        return None
    if deferred is None:
        return generate() if aux_out is None else generate(out=aux_out)
    if not defers_witness(circuit):
        raise ValueError(f"{type(circuit).__name__}'s generator cannot leave part of its aux to a device")
    return generate(out=aux_out, deferred=deferred)


def defers_witness(circuit: Circuit) -> bool:
    """Whether the circuit's batched generator can leave its bulk gadgets' aux to a device
    (`witness_arrays(deferred=...)`: PoRep's SHA-256 gadgets, PoSt's openings)."""
    return bool(getattr(circuit, "DEFERS_WITNESS", False))


def generated_witness_shape(circuit: Circuit) -> tuple[int, int] | None:
    """(num_inputs, num_aux) of the batched generator's output, for a circuit that states them before
    generating (a `witness_shape()` method: PoRep's, PoSt's, SnapDeals'), else None."""
    shape = getattr(circuit, "witness_shape", None)
    return None if shape is None else shape()


def synthesize_compiled(circuit: Circuit, compiled: CompiledCircuit, *, check: bool = True) -> Assignment:
    """The prover's Assignment through a compiled circuit: the witness, then the sparse products.

    The witness comes from the circuit's batched generator (`generated_witness`) when it has one,
    else from `WitnessCS`. With `check`, every row must satisfy a·b = c (SynthesisError
    otherwise): a cheap pass that also catches a compiled circuit that does not belong to this
    circuit's code, or a generator that disagrees with its gadgets.
    """
    from cuzk.groth16.assignment import Assignment

    generated = generated_witness(circuit)
    if generated is not None:
        inputs, aux = generated
        compiled.check_witness(inputs.shape[0], aux.shape[0])
        return Assignment.from_compiled(compiled, generated, check=check)
    witness = synthesize_witness(circuit)
    compiled.check_witness(witness.num_inputs, witness.num_aux, witness.num_constraints)
    return Assignment.from_compiled(compiled, witness, check=check)
