"""Filecoin circuit providers: PoRep C2, WinningPoSt, WindowPoSt and SnapDeals requests as engine jobs.

Each provider turns one SubmitProofRequest, exactly as Curio sends it (docs/protocol.md §3),
into the partitions of the matching compound proof (`cuzk.circuits.filecoin.compound*`):

============================  =================================================================
kind (registered_proof)       payload
============================  =================================================================
POREP_SEAL_COMMIT             `vanilla_proof`: the commit phase-1 output, see "PoRep payloads";
(the C1's RegisteredSeal-     `sector_number`, `miner_id` (prover_id = LEB128 of the actor id,
Proof)                        zero-padded to 32 bytes, docs/circuits.md §1).
WINNING_POST (0-4)            `vanilla_proofs`: one bincode FallbackPoStSectorProof (66 openings);
                              `randomness` (32 bytes, a canonical Fr); `miner_id`.
WINDOW_POST_PARTITION         `vanilla_proofs`: one bincode FallbackPoStSectorProof (10 openings)
(5-14; 10-14 = on-chain       per sector of the partition, ascending sector ids; `randomness`;
V1_1 = proofs-api V1_2)       `partition_index`; `miner_id`. One partition, one 192-byte proof.
SNAP_DEALS_UPDATE (0-4)       `vanilla_proofs`: one bincode PartitionProof per partition;
                              `comm_r_old`, `comm_r_new`, `comm_d_new`: 32 raw bytes each.
============================  =================================================================

`sector_size`, when non-zero, must be the registered proof's sector size (0: not given). Fields a
kind does not use (e.g. `sector_number` of a SnapDeals request) are ignored (docs/compatibility.md §3).

PoRep payloads (`vanilla_proof`), told apart by their first bytes:

1. Curio's wrapper, what `PoRepSnarkCuzk` sends: JSON `{"SectorNum": n, "Phase1Out": "<base64>",
   "SectorSize": bytes}`, where Phase1Out (Go's []byte, so standard base64) holds the C1 output as
   filecoin-ffi's serde JSON — or as supraseal/Curio bincode (form 3).
2. A bare C1 JSON (`cuzk gen-vanilla` writes `c1.json`): a JSON object whose top-level keys include
   `registered_proof` / `vanilla_proofs`.
3. A bare bincode C1 (supraseal / Curio `porep_vproof_bin`, `cuzk gen-vanilla` `c1.bin`). The format
   does not record its proof type, so `registered_proof` names it, and the bytes are taken as bincode
   only if they are exactly as long as that proof's C1 and start with its partition and challenge
   counts; anything else is refused with those numbers.

For the JSON forms the C1's own `registered_proof` decides the circuit (docs/compatibility.md §3); a
non-zero request `registered_proof` must name the same proof (0 is the proto default, i.e. not
given). The sector number is the request's `sector_number`, or the wrapper's SectorNum when the
request leaves it 0; both non-zero and different is refused. NonInteractivePoRep C1 outputs are
refused: their C2 result is a SnarkPack aggregate, which this daemon does not make.

When things are checked: `circuit_id` (at submit; errors are gRPC INVALID_ARGUMENT) checks what
costs at most a pass over the bytes at C speed — kind vs registered_proof vs sector_size, payload
presence, randomness and commitment lengths and canonicity, the exact byte length of every bincode
vanilla proof (a pure function of the proof type, so truncation is caught here), base64, WindowPoSt
sector order. `plan` (on a planning thread) parses everything, builds the compound proof (which
checks the Merkle shapes and roots), derives each partition's public inputs from public data only,
and compares them with the inputs the witness will expose, so a C1 made for another miner or
sector, or PoSt openings of other randomness, fail with a reason before any synthesis.

Recipes: partition k's recipe carries partition k's circuit — the compound's mapping of just that
partition's vanilla proofs to witness values (ints and paths; PoRep's labeling proofs are not part
of it) — plus the public inputs it must expose, never the whole C1 or sector list. In the synthesis
process it synthesizes, refuses a witness whose allocated inputs differ from the plan's, and
returns the Assignment. The engine concatenates the partition proofs in order, which is the proof
format of every kind (P × 192 bytes).

Parameters: `<srs.param_cache>/<official v28 .params name>` (`cuzk.filecoin.sizes.parameter_file_name`,
e.g. `v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-82a357d2….params`;
its `.vk` lies next to it, but the daemon reads the verifying key from the .params head). They come
from the trusted setup and are never generated here: a missing file fails the job (at the start of
`plan`, naming the file) and PreloadSRS of it fails with the engine's "parameter file … does not
exist" message.

Shapes and memory: `shape_call` never synthesizes the production circuit (130M constraints for
porep-32g). It reads the .params header when the file exists (`scan_layout`): the domain size is
|H| + 1, num_aux = |L|, num_inputs = |IC|, the A query is every input plus the aux of non-zero A
density, the B query is ONE plus the aux of non-zero B density (only ONE of the inputs reaches B in
every Filecoin circuit). The constraint count is not in the header; it is taken from
`KNOWN_SHAPES` when the header agrees with that entry, else the domain size (an upper bound).
Without the file, `KNOWN_SHAPES` is the shape: exact counts of this code base's circuits, synthesized
directly for the small ones and extrapolated linearly from 1- and 2-challenge (PoRep), 1- and
2-sector (PoSt) and 1-, 2- and (d+1)-challenge (SnapDeals: d challenges per Poseidon digest, so the
last one adds a digest) variants for the large ones (extrapolation equals direct synthesis wherever
both were run). They reproduce every count published for rust-fil-proofs' circuits: PoRep 8MiB,
512MiB, 32GiB and 64GiB rows (3,844,929 / 4,423,433 / 130,278,541 / 131,185,849, each + the input
rows), WindowPoSt 32GiB / 64GiB (125,279,217 / 129,887,900), SnapDeals 32GiB (81,049,499)
(docs/circuits.md §6, §9, §10, §13), and porep-32g's aux count and A/B densities as the Rust daemon's
pre-compiled evaluator extracted them (130,169,893 aux, 129,753,292 / 33,112,281; docs/circuits.md §11).

The engine reserves `PartitionEstimate.from_shape(shape)` per partition (cuzk.engine.memory), with n
constraints, v = inputs + aux variables and m = domain size:

* shared memory: the assignment's a, b, c (n each), inputs and aux (v) as (·, 4) uint64 = 32 B per
  element, plus one byte per density entry: 32·(3n + v) + inputs + 2·aux B — porep-32g: 16.9 GB;
* synthesis (released when the assignment is exported): 320 B per constraint + 120 B per variable.
  Measured peak of a Filecoin partition's synthesis including the Assignment it returns: 341 B per
  constraint for porep-2k (918 MB for 2.69M constraints) and snap-2k, against the 440 B the formula
  gives (factor 0.78);
* proving: 800 B per domain element + 256 B per variable. The NTT's three (m, 4) uint64 arrays
  alone are 96 B per domain element; the CPU prover's measured working set on top of the loaded
  key (NTT temporaries, density-selected scalars, the MSMs' scalar copies) was 609 B per domain
  element for porep-2k (m = 2^22: 2.55 GB) and 934 B for winning-2k (m = 2^17), i.e. 6.3x to 9.7x
  the bare NTT arrays, against 1128 B and 979 B the formula gives (factors 0.54 and 0.95).

So the engine's generic estimate covers Filecoin partitions and plans set no extra minimum
(`JobPlan.min_partition_bytes` = 0); for porep-32g it reserves 57 GB (synthesis) + 16.9 GB (shared)
+ 141 GB (proving) = 215 GB per partition on the CPU backend, 5.6 GB for porep-2k, 0.18 GB for
winning-2k.

That is the constraint-system path. With a ready compiled circuit (`JobPlan.compiled`) and a budget
that cannot hold the constraint-system estimate, the engine reserves `PartitionEstimate.compiled`
instead (witness and generator temporaries, the witness or a, b, c in shared memory, and the host side
of the prover: ~23 GB for porep-32g with a GPU prover computing the products) and pins the recipes to
the compiled path (`compiled_only`: no fallback that would outgrow the reservation).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuzk.engine.compiled_store import BuildSize, CompiledStore
from cuzk.engine.jobs import ProofKind, ProofRequest
from cuzk.engine.providers import (
    CircuitProvider,
    CircuitRecipe,
    InvalidRequestError,
    JobPlan,
    PartitionPlan,
    SrsSource,
    WorkerCall,
)
from cuzk.errors import CuzkError, SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.sizes import (
    TOTAL_PARENTS,
    CircuitKind,
    RegisteredPoStProof,
    RegisteredSealProof,
    RegisteredUpdateProof,
    SectorParams,
    parameter_file_name,
    parse_circuit_id,
    post_proof,
    seal_proof,
    update_proof,
)
from cuzk.filecoin.sizes import circuit_id as fc_circuit_id
from cuzk.r1cs import CircuitShape

log = logging.getLogger("cuzk.engine.filecoin")

__all__ = [
    "KNOWN_SHAPES",
    "FilecoinPartitionRecipe",
    "MissingParametersError",
    "PorepPayload",
    "PorepProvider",
    "SnapProvider",
    "WindowPostProvider",
    "WinningPostProvider",
    "c1_bincode_bytes",
    "filecoin_circuit_shape",
    "filecoin_providers",
    "merkle_proof_bytes",
    "porep_payload",
    "post_sector_proof_bytes",
    "prover_id_from_miner",
    "shape_from_layout",
    "snap_partition_proof_bytes",
]

_U64 = 1 << 64


class MissingParametersError(CuzkError):
    """A Filecoin parameter file is not in srs.param_cache (the job fails; the request was fine)."""


# -- shapes ---------------------------------------------------------------------------------------

def _shape(inputs: int, aux: int, constraints: int, a_aux: int, b_aux: int) -> CircuitShape:
    """Every input reaches A (the input constraints), only ONE reaches B, in every Filecoin circuit."""
    return CircuitShape(num_inputs=inputs, num_aux=aux, num_constraints=constraints, a_input_density=inputs,
                        a_aux_density=a_aux, b_input_density=1, b_aux_density=b_aux)


#: Exact shapes (input constraints included) of this code base's Filecoin circuits; see the module
#: docstring for how they were obtained and checked.
KNOWN_SHAPES: dict[str, CircuitShape] = {
    "winning-2k": _shape(133, 91_674, 90_883, 69_300, 66_792),
    "winning-8m": _shape(133, 233_442, 230_803, 176_748, 169_488),
    "winning-512m": _shape(133, 304_326, 300_763, 230_472, 220_836),
    "winning-32g": _shape(133, 375_210, 370_723, 284_196, 272_184),
    "winning-64g": _shape(133, 396_000, 391_447, 299_838, 287_694),
    "wpost-2k": _shape(23, 22_128, 21_889, 16_770, 16_028),
    "wpost-8m": _shape(23, 65_088, 64_289, 49_330, 47_148),
    "wpost-512m": _shape(23, 86_568, 85_489, 65_610, 62_708),
    "wpost-32g": _shape(25_840, 126_902_376, 125_305_057, 96_179_805, 91_925_766),
    "wpost-64g": _shape(25_301, 131_500_200, 129_913_201, 99_624_500, 95_413_200),
    "porep-2k": _shape(40, 2_685_673, 2_687_961, 2_674_908, 685_521),
    "porep-8m": _shape(40, 3_842_449, 3_844_969, 3_814_996, 1_011_289),
    "porep-512m": _shape(40, 4_420_837, 4_423_473, 4_385_040, 1_174_173),
    "porep-32g": _shape(328, 130_169_893, 130_278_869, 129_753_292, 33_112_281),
    "porep-64g": _shape(328, 131_076_643, 131_186_177, 130_637_542, 33_386_943),
    "snap-2k": _shape(5, 1_703_569, 1_705_044, 1_697_189, 444_403),
    "snap-8m": _shape(5, 9_998_039, 10_007_508, 9_981_015, 2_567_921),
    "snap-512m": _shape(5, 57_401_314, 57_450_484, 57_212_317, 14_916_879),
    "snap-32g": _shape(5, 80_978_488, 81_049_504, 80_743_581, 20_983_607),
    "snap-64g": _shape(5, 84_931_220, 85_006_106, 84_682_725, 22_012_683),
}


def known_constraints(circuit_id: str) -> int | None:
    """The rows of a Filecoin circuit id (`KNOWN_SHAPES`); None for other ids."""
    known = KNOWN_SHAPES.get(circuit_id)
    return None if known is None else known.num_constraints


def build_size(circuit_id: str) -> BuildSize | None:
    """What the compiled-circuit store needs to know to build a Filecoin circuit id: its rows and
    variables (`KNOWN_SHAPES`), its identical blocks (`block_count`: PoRep challenges, PoSt sectors,
    SnapDeals challenges) and its header rows (`block_header_rows`: SnapDeals' apex tree); None for
    ids that are not Filecoin circuits."""
    from cuzk.circuits.filecoin.blocks import block_count, block_header_rows

    known = KNOWN_SHAPES.get(circuit_id)
    if known is None:
        return None
    return BuildSize(known.num_constraints, known.num_inputs + known.num_aux, blocks=block_count(circuit_id),
                     header_rows=block_header_rows(circuit_id))


def shape_from_layout(layout: Any, known: CircuitShape | None) -> CircuitShape:
    """A circuit's shape from a `.params` header (`scan_layout`); `known` supplies the constraint
    count when the header agrees with it (the header only bounds it by the domain size)."""
    domain = layout.vector("h").count + 1
    inputs = layout.num_ic
    aux = layout.vector("l").count
    b_input = 1
    constraints = domain
    if known is not None and (known.num_inputs, known.num_aux) == (inputs, aux) and \
            domain // 2 < known.num_constraints <= domain:
        constraints = known.num_constraints
    elif known is not None:
        log.warning("%s does not match the circuit (inputs %d, aux %d; expected %d, %d): sizing partitions by "
                    "its domain of %d", layout.path, inputs, aux, known.num_inputs, known.num_aux, domain)
    return CircuitShape(num_inputs=inputs, num_aux=aux, num_constraints=constraints, a_input_density=inputs,
                        a_aux_density=layout.vector("a").count - inputs, b_input_density=b_input,
                        b_aux_density=layout.vector("b_g1").count - b_input)


def filecoin_circuit_shape(circuit_id: str, params_path: str) -> CircuitShape:
    """Worker call: the shape of a Filecoin circuit from its .params header, or from KNOWN_SHAPES
    when the file is absent (the job then fails at parameter loading, naming the file)."""
    from cuzk.groth16.formats.params_file import scan_layout

    known = KNOWN_SHAPES[circuit_id]
    path = Path(params_path)
    if not path.is_file():
        return known
    layout = scan_layout(path)
    if layout.is_vk_only:  # loading will refuse it with the reason; size by the known shape meanwhile
        return known
    return shape_from_layout(layout, known)


def warm_up_witness_generators() -> None:
    """Worker call: the batched witness generators of every Filecoin circuit (SHA-256, Poseidon, Merkle
    paths of both tree kinds) once, on a PoRep-2KiB-shaped partition of random values."""
    from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit

    random_stacked_circuit(PRODUCTION_CONFIGS[2 << 10]).witness_arrays()


# -- byte sizes of the bincode forms (docs/formats.md §5) ------------------------------------------

def merkle_proof_bytes(layout: TreeLayout) -> int:
    """Bincode size of a MerkleProof of `layout`: u32 tag, one u64-counted path per part (base, sub,
    top), per level u64 hash count + siblings + u64 index, root and leaf."""
    paths = {"Single": 1, "Sub": 2, "Top": 3}[layout.kind]
    return 4 + 64 + 8 * paths + sum(16 + 32 * (arity - 1) for arity in layout.arities)


def post_sector_proof_bytes(size: SectorParams, challenges: int) -> int:
    """A FallbackPoStSectorProof of one sector with `challenges` openings."""
    return 8 + 32 + 8 + 8 + challenges * merkle_proof_bytes(TreeLayout.tree_r(size)) + 64


def snap_partition_proof_bytes(size: SectorParams) -> int:
    """A SnapDeals PartitionProof: comm_c, apex leaves, per challenge r_old, d_new, r_new openings."""
    tree_r = merkle_proof_bytes(TreeLayout.tree_r(size))
    tree_d = merkle_proof_bytes(TreeLayout.tree_d(size.nodes))
    return 32 + 8 + 32 * size.snap_apex_leaves + 8 + size.snap_challenges * (2 * tree_r + tree_d)


def c1_bincode_bytes(proof: RegisteredSealProof) -> int:
    """The supraseal/Curio bincode C1 of `proof` (no registered_proof, no size-enum wrapper)."""
    size = proof.size
    layers = size.layers
    tree_r = merkle_proof_bytes(TreeLayout.tree_r(size))
    tree_d = merkle_proof_bytes(TreeLayout.tree_d(size.nodes))
    column = 4 + 8 + 32 * layers + tree_r
    labeling = 8 + 32 * TOTAL_PARENTS + 4 + 8
    challenge = tree_d + tree_r + 15 * column + 3 * 8 + (layers + 1) * labeling
    return 8 + proof.partitions * (8 + proof.challenges_per_partition * challenge) + 5 * 32


def prover_id_from_miner(miner_id: int) -> bytes:
    """prover_id = the ID address payload: unsigned LEB128 of the actor id, zero-padded to 32 bytes
    (Curio's `toProverID`, the Rust daemon's `make_prover_id`)."""
    if not 0 <= miner_id < _U64:
        raise InvalidRequestError(f"miner_id must be a u64, got {miner_id}")
    out = bytearray()
    value = miner_id
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out).ljust(32, b"\0")


# -- the recipe -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class FilecoinPartitionRecipe(CircuitRecipe):
    """One partition: its circuit (only this partition's witness) and the inputs it must expose."""

    circuit_id: str
    index: int
    circuit: Any
    public_inputs: tuple[int, ...]
    label: str
    #: A ready compiled circuit of `circuit_id` (`cuzk.engine.compiled_store`) when planned, else None.
    compiled_path: str | None = None
    #: Where a compiled circuit's a, b, c are computed: here ("synthesis") or by the prover's
    #: backend ("prover": the recipe returns a `CompiledWitness`; the GPU for the CUDA backend).
    sparse_products: str = "synthesis"
    #: False when the engine reserved memory for the compiled path only: a compiled circuit that cannot
    #: be used then fails the partition instead of falling back to the (much larger) constraint system.
    fallback: bool = True
    #: With the products on the prover: leave a generator's bulk (PoRep's SHA-256 gadgets and Poseidon
    #: paths, 99% of its aux; PoSt's Merkle openings, 99%) for the prover's device to write
    #: (`cuzk.witness_gen.deferred`).
    device_witness: bool = False

    def build(self) -> Any:
        return self.circuit

    @property
    def batched_witness(self) -> bool:
        """Whether the circuit has a batched witness generator (`generated_witness`), whose memory
        needs on the compiled path are a fraction of WitnessCS's (`PartitionEstimate.compiled`)."""
        return callable(getattr(self.circuit, "witness_arrays", None))

    def compiled_only(self) -> FilecoinPartitionRecipe:
        return replace(self, fallback=False) if self.compiled_path is not None else self

    def assignment(self) -> Any:
        """Synthesize, and refuse a witness exposing other public inputs than the plan derived
        (its proof could only fail verification): checked on the Python ints, before conversion.

        With a compiled circuit, the witness comes from the circuit's batched generator (PoSt,
        SnapDeals, ...; `generated_witness`) or else WitnessCS, and a, b, c from its sparse
        products; whenever that path cannot be used (file unusable, counts differ, a row a·b != c)
        it is logged and the constraint-system path below runs instead, as without the file. With
        `sparse_products = "prover"` the witness alone comes back (`CompiledWitness`): the prover
        computes the products and checks the rows, and a failed row check fails the partition."""
        return self.assignment_into(None)

    def assignment_into(self, segment: Callable[[int, int], Any] | None) -> Any:
        """`assignment`; on the prover-products path a circuit that states its witness counts (PoRep,
        PoSt, SnapDeals) writes inputs and aux straight into `segment(num_inputs, num_aux)` (a
        `WitnessSegment`)."""
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import synthesize_for_proving

        if self.compiled_path is not None:
            asg = self._compiled_assignment(segment)
            if asg is not None:
                return asg
            if not self.fallback:
                raise SynthesisError(f"{self.circuit_id} {self.label}: the compiled circuit {self.compiled_path} could "
                                     "not be used (see the log) and this partition's memory was reserved for the "
                                     "compiled path, which the constraint system would far exceed")
        cs = synthesize_for_proving(self.circuit)
        self._check_inputs(cs.input_assignment)
        return Assignment.from_proving_assignment(cs)

    def _check_inputs(self, allocated: Sequence[int]) -> None:
        from cuzk.circuits.filecoin.compound import PublicInputMismatchError

        diff = _differences(allocated[1:], self.public_inputs)
        if diff:
            raise PublicInputMismatchError(
                f"{self.circuit_id} {self.label}: the witness allocates public inputs that differ from the ones "
                f"derived from the public data at {len(diff)} position(s) (first: {diff[:8]})")

    def _compiled_assignment(self, make_segment: Callable[[int, int], Any] | None) -> Any:
        from cuzk.engine.compiled_store import header_for_synthesis, load_for_synthesis
        from cuzk.field.limbs import limbs_to_ints
        from cuzk.groth16.assignment import Assignment
        from cuzk.groth16.synthesis import (
            defers_witness,
            generated_witness,
            generated_witness_shape,
            synthesize_witness,
        )
        from cuzk.r1cs.compiled import CompiledMismatchError
        from cuzk.witness_gen.deferred import DeferredWitness

        on_prover = self.sparse_products == "prover"
        # With the products on the prover only the counts are used here: the header, not the matrices.
        compiled = (header_for_synthesis if on_prover else load_for_synthesis)(self.compiled_path, self.circuit_id)
        if compiled is None:
            return None
        segment = None
        try:
            shape = generated_witness_shape(self.circuit) if on_prover and make_segment is not None else None
            if shape is not None:  # generated in place, into a segment of the stated counts
                try:
                    compiled.check_witness(*shape)
                except CompiledMismatchError as err:
                    return self._compiled_not_used(err)
                segment = make_segment(*shape)
            deferred = (DeferredWitness() if on_prover and self.device_witness and defers_witness(self.circuit)
                        else None)
            generated = generated_witness(self.circuit, None if segment is None else segment.aux, deferred)
            witness: Any
            if generated is not None:  # the circuit's batched generator: limb arrays, no constraint system
                witness, counts = generated, (generated[0].shape[0], generated[1].shape[0], None)
                self._check_inputs(limbs_to_ints(generated[0]))
            else:
                witness = synthesize_witness(self.circuit)
                counts = (witness.num_inputs, witness.num_aux, witness.num_constraints)
                self._check_inputs(witness.input_assignment)
            try:
                compiled.check_witness(*counts)
                if on_prover:
                    asg = self._witness_for_prover(generated, witness, compiled.num_constraints, segment, deferred)
                    segment = None  # it travels with the witness now
                    return asg
                return Assignment.from_compiled(compiled, witness, check=True)
            except (CompiledMismatchError, SynthesisError) as err:
                return self._compiled_not_used(err)
        finally:
            if segment is not None:  # not handed over: failed, or not used
                segment.discard()

    def _compiled_not_used(self, err: Exception) -> None:
        log.warning("%s %s: compiled circuit %s not used (%s); synthesizing with the constraint system",
                    self.circuit_id, self.label, self.compiled_path, err)

    def _witness_for_prover(self, generated: Any, witness: Any, num_constraints: int, segment: Any,
                            deferred: Any) -> Any:
        """The `CompiledWitness`: in `segment` when it was generated there (the segment then travels
        with it), else as limb arrays of its own; with the gadgets `deferred` left out of aux."""
        from cuzk.engine.synthesis import CompiledWitness
        from cuzk.field.limbs import ints_to_limbs

        assert self.compiled_path is not None
        if segment is not None:
            segment.inputs[...] = generated[0]
            return CompiledWitness(segment.inputs, segment.aux, self.compiled_path, num_constraints, segment, deferred)
        inputs, aux = (generated if generated is not None else
                       (ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)))
        return CompiledWitness(inputs, aux, self.compiled_path, num_constraints, deferred=deferred)


def _differences(a: Sequence[int], b: Sequence[int]) -> list[int]:
    n = min(len(a), len(b))
    return [i for i in range(n) if a[i] != b[i]] + list(range(n, max(len(a), len(b))))


# -- shared validation ------------------------------------------------------------------------------

def _canonical32(value: bytes, name: str, where: str, *, required: bool = True) -> bytes:
    if not value:
        if required:
            raise InvalidRequestError(f"{where}: {name} is required (32 bytes)")
        return value
    if len(value) != 32:
        raise InvalidRequestError(f"{where}: {name} must be 32 bytes, got {len(value)}")
    if int.from_bytes(value, "little") >= R_MODULUS:
        raise InvalidRequestError(f"{where}: {name} is not a canonical field element (little-endian value >= r): "
                                  f"{value.hex()}")
    return value


def _check_sector_size(request: ProofRequest, size: SectorParams, proof_name: str, where: str) -> None:
    if request.sector_size and request.sector_size != size.sector_bytes:
        raise InvalidRequestError(f"{where}: sector_size {request.sector_size} disagrees with {proof_name}, a "
                                  f"{size.name} proof ({size.sector_bytes} bytes)")


def _check_vanilla_list(request: ProofRequest, where: str, what: str, lo: int, hi: int, each: int) -> None:
    """`vanilla_proofs` holds lo..hi entries of exactly `each` bytes; `vanilla_proof` is empty."""
    if request.vanilla_proof:
        raise InvalidRequestError(f"{where}: send the {what}s in vanilla_proofs (one per entry); vanilla_proof must "
                                  "be empty")
    n = len(request.vanilla_proofs)
    if not lo <= n <= hi:
        count = f"exactly {lo}" if lo == hi else f"{lo} to {hi}"
        raise InvalidRequestError(f"{where}: vanilla_proofs holds {n} {what}(s), expected {count}")
    for i, blob in enumerate(request.vanilla_proofs):
        if len(blob) != each:
            problem = "truncated" if len(blob) < each else "longer than that"
            raise InvalidRequestError(f"{where}: vanilla_proofs[{i}] is {len(blob)} bytes; a bincode {what} of this "
                                      f"proof type is exactly {each} bytes ({problem}; another sector size or proof "
                                      "type?)")


def _invalid(where: str, err: CuzkError) -> InvalidRequestError:
    return InvalidRequestError(f"{where}: {err}")


class FilecoinProvider(CircuitProvider):
    """What the four kinds share: parameter files, shapes, planning from a compound proof."""

    family: CircuitKind
    kind: ProofKind

    def __init__(self, param_cache: str | Path, *, compiled: CompiledStore | None = None,
                 sparse_products: str = "synthesis", device_witness: bool = False) -> None:
        self.param_cache = Path(param_cache)
        #: Compiled circuits: used when ready; built on first use only if the store says so.
        self.compiled = compiled if compiled is not None else CompiledStore(self.param_cache / "compiled")
        #: Where compiled circuits' a, b, c are computed (`FilecoinPartitionRecipe.sparse_products`).
        self.sparse_products = sparse_products
        #: Whether the prover's device writes the deferred gadgets' aux (`FilecoinPartitionRecipe.device_witness`).
        self.device_witness = device_witness

    @property
    def where(self) -> str:
        return self.kind.proto_name

    # -- parameters ---------------------------------------------------------------------------
    def params_path(self, circuit_id: str) -> Path:
        kind, size = parse_circuit_id(circuit_id)
        return self.param_cache / parameter_file_name(kind, size)

    def srs_source(self, circuit_id: str) -> SrsSource | None:
        try:
            kind, _ = parse_circuit_id(circuit_id)
        except CuzkError:
            return None
        if kind is not self.family:
            return None
        return SrsSource(circuit_id, self.params_path(circuit_id))

    def shape_call(self, circuit_id: str) -> WorkerCall:
        return (f"{__name__}:filecoin_circuit_shape", (circuit_id, str(self.params_path(circuit_id))))

    def warm_up_calls(self) -> list[WorkerCall]:
        return [(f"{__name__}:warm_up_witness_generators", ())]

    def require_params(self, circuit_id: str) -> Path:
        """Fail a job whose parameters are absent before any parsing work, naming the file."""
        path = self.params_path(circuit_id)
        if not path.is_file():
            raise MissingParametersError(
                f"{circuit_id}: parameter file {path} does not exist (srs.param_cache = {self.param_cache}). Filecoin "
                "parameters come from the trusted setup and are never generated by cuzk: fetch the v28 .params and "
                ".vk files (e.g. `curio fetch-params <sector size>`) into srs.param_cache")
        return path

    # -- planning -------------------------------------------------------------------------------
    @abstractmethod
    def compound(self, request: ProofRequest) -> Any:
        """The request's `CompoundProof`, fully parsed and checked (InvalidRequestError with the reason)."""

    def mismatch_hint(self, request: ProofRequest, compound: Any, k: int, positions: list[int]) -> str:
        """Why partition k's witness would expose other inputs than the public data imply."""
        return "the vanilla proofs do not answer the challenges the public data imply"

    def plan(self, request: ProofRequest) -> JobPlan:
        cid = self.circuit_id(request)
        self.require_params(cid)
        compound = self.compound(request)
        compiled_path = self._compiled_path(cid)
        partitions = []
        for k in range(compound.partition_count):
            inputs = compound.public_inputs(k)
            positions = _differences(compound.witness_public_inputs(k), inputs)
            if positions:
                hint = self.mismatch_hint(request, compound, k, positions)
                raise InvalidRequestError(f"{self.where}: partition {k}: {hint} ({len(positions)} of {len(inputs)} "
                                          f"public inputs differ, first at position {positions[0]})")
            recipe = FilecoinPartitionRecipe(cid, k, compound.partition_circuit(k), tuple(inputs),
                                             f"{request.request_id} partition {k}", compiled_path,
                                             self.sparse_products, device_witness=self.device_witness)
            partitions.append(PartitionPlan(k, recipe, inputs))
        return JobPlan(cid, partitions, compiled=compiled_path is not None)

    def _compiled_path(self, circuit_id: str) -> str | None:
        """The ready compiled circuit of `circuit_id`, if any; on first use, a background build
        when the store builds automatically. Never fails a job: problems are logged."""
        if not self.compiled.enabled:
            return None
        try:
            self.compiled.ensure(circuit_id, build_size(circuit_id))
            return self.compiled.ready_path(circuit_id)
        except (CuzkError, OSError) as err:
            log.warning("%s: compiled circuits unavailable (%s); synthesizing with the constraint system",
                        circuit_id, err)
            return None


# -- PoRep ------------------------------------------------------------------------------------------

_C1_KEYS_RE = re.compile(rb'"(?:registered_proof|vanilla_proofs|comm_r|comm_d|replica_id|seed|ticket)"\s*:')
_REGISTERED_RE = re.compile(rb'"registered_proof"\s*:\s*"([^"\\]{0,80})"')
#: The top-level keys of a C1 JSON are short; one of them is within this many bytes of the start.
_SNIFF_BYTES = 1 << 16


@dataclass(frozen=True)
class PorepPayload:
    """The C1 bytes of a PoRep request and what the submit-time checks established about them."""

    proof: RegisteredSealProof
    form: str  #: "curio-wrapper/json", "curio-wrapper/bincode", "json" or "bincode"
    sector_number: int
    c1: bytes  #: the C1 output: serde JSON text or bincode

    @property
    def is_json(self) -> bool:
        return self.form.endswith("json")


def _is_json(data: bytes) -> bool:
    return data[:64].lstrip()[:1] == b"{"


def _sniff_json_proof(c1: bytes, where: str) -> RegisteredSealProof:
    """The registered proof a C1 JSON names, found by a regex pass instead of a full parse."""
    m = _REGISTERED_RE.search(c1)
    if m is None:
        raise InvalidRequestError(f"{where}: the C1 output JSON has no \"registered_proof\" string")
    name = m.group(1).decode("ascii", "replace")
    try:
        return seal_proof(name)
    except CuzkError:
        raise InvalidRequestError(f"{where}: the C1 output's registered_proof {name!r} is not a RegisteredSealProof")\
            from None


def _bincode_proof(c1: bytes, registered: int, where: str) -> RegisteredSealProof:
    """The proof a bincode C1 is of: the request's registered_proof, if the bytes fit it exactly."""
    try:
        proof = seal_proof(registered)
    except CuzkError:
        raise InvalidRequestError(f"{where}: the payload is not JSON, so it must be a bincode C1 output, which does "
                                  f"not name its proof type: registered_proof must be a RegisteredSealProof id "
                                  f"(0-19), got {registered}") from None
    expected = c1_bincode_bytes(proof)
    counts = (int.from_bytes(c1[0:8], "little"), int.from_bytes(c1[8:16], "little")) if len(c1) >= 16 else None
    if len(c1) != expected or counts != (proof.partitions, proof.challenges_per_partition):
        got = f"{len(c1)} bytes" + (f" starting with counts {counts[0]}, {counts[1]}" if counts else "")
        raise InvalidRequestError(
            f"{where}: the payload is neither JSON nor a bincode C1 output of {proof.name} (registered_proof "
            f"{registered}): that is exactly {expected} bytes starting with u64 partitions = {proof.partitions} and "
            f"u64 challenges = {proof.challenges_per_partition}; got {got}")
    return proof


def _wrapper_int(data: dict, key: str, where: str) -> int:
    if key not in data:
        raise InvalidRequestError(f"{where}: Curio's C1 wrapper lacks {key!r} (it has {', '.join(sorted(data))})")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _U64:
        raise InvalidRequestError(f"{where}: the wrapper's {key} must be an unsigned integer, got {value!r}")
    return value


def porep_payload(request: ProofRequest) -> PorepPayload:
    """Recognise the PoRep payload form and its proof type (see the module docstring); raises
    InvalidRequestError with the reason. Costs a JSON parse of the wrapper and a base64 decode."""
    where = ProofKind.POREP_SEAL_COMMIT.proto_name
    payload = request.vanilla_proof
    if request.vanilla_proofs:
        raise InvalidRequestError(f"{where}: send the commit phase-1 output in vanilla_proof; vanilla_proofs must be "
                                  "empty")
    if not payload:
        raise InvalidRequestError(f"{where}: vanilla_proof is empty; it must hold the commit phase-1 output (Curio's "
                                  "{SectorNum, Phase1Out, SectorSize} JSON, a C1 JSON or a bincode C1)")
    wrapper_number: int | None = None
    wrapper_size: int | None = None
    if _is_json(payload) and _C1_KEYS_RE.search(payload, 0, _SNIFF_BYTES):
        c1, form = payload, "json"
    elif _is_json(payload):
        try:
            data = json.loads(payload)
        except (ValueError, RecursionError) as err:  # also over-long numbers and too deep nesting
            raise InvalidRequestError(f"{where}: vanilla_proof is not valid JSON: {err}") from None
        if not isinstance(data, dict) or "Phase1Out" not in data:
            raise InvalidRequestError(f"{where}: vanilla_proof is JSON but neither Curio's {{SectorNum, Phase1Out, "
                                      "SectorSize}} wrapper nor a C1 output (no Phase1Out or registered_proof key)")
        encoded = data["Phase1Out"]
        if not isinstance(encoded, str) or not encoded:
            raise InvalidRequestError(f"{where}: the wrapper's Phase1Out must be a non-empty base64 string, got "
                                      f"{type(encoded).__name__}")
        wrapper_number = _wrapper_int(data, "SectorNum", where)
        wrapper_size = _wrapper_int(data, "SectorSize", where)
        try:
            c1 = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as err:
            raise InvalidRequestError(f"{where}: the wrapper's Phase1Out is not valid base64 ({err})") from None
        form = "curio-wrapper/json" if _is_json(c1) else "curio-wrapper/bincode"
    else:
        c1, form = payload, "bincode"
    if form.endswith("json"):
        proof = _sniff_json_proof(c1, where)
        if request.registered_proof and request.registered_proof != proof.id:
            other = _proof_name(request.registered_proof, seal_proof)
            raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof}{other} disagrees with the "
                                      f"C1 output's {proof.name} ({proof.id})")
    else:
        proof = _bincode_proof(c1, request.registered_proof, where)
    if proof.non_interactive:
        raise InvalidRequestError(f"{where}: {proof.name}: seal_commit_phase2 returns a SnarkPack aggregate of the "
                                  "partition proofs for non-interactive PoRep, which this daemon does not produce")
    if wrapper_size is not None and wrapper_size != proof.size.sector_bytes:
        raise InvalidRequestError(f"{where}: the wrapper's SectorSize {wrapper_size} disagrees with the C1 output's "
                                  f"{proof.name} ({proof.size.sector_bytes} bytes)")
    _check_sector_size(request, proof.size, proof.name, where)
    number = request.sector_number
    if wrapper_number is not None and wrapper_number != number:
        if number:
            raise InvalidRequestError(f"{where}: sector_number {number} disagrees with the wrapper's SectorNum "
                                      f"{wrapper_number}")
        number = wrapper_number
    prover_id_from_miner(request.miner_id)
    return PorepPayload(proof, form, number, c1)


def _proof_name(value: int, lookup: Any) -> str:
    try:
        return f" ({lookup(value).name})"
    except CuzkError:
        return ""


class PorepProvider(FilecoinProvider):
    """POREP_SEAL_COMMIT: a C1 output to the P partition proofs of `seal_commit_phase2`."""

    name = "filecoin-porep"
    kinds = (ProofKind.POREP_SEAL_COMMIT,)
    family = CircuitKind.POREP
    kind = ProofKind.POREP_SEAL_COMMIT

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.POREP, porep_payload(request).proof.size)

    def batchable(self, request: ProofRequest) -> bool:
        return True

    def compound(self, request: ProofRequest) -> Any:
        from cuzk.circuits.filecoin.compound_porep import PorepC2
        from cuzk.filecoin.c1 import SealCommitPhase1Output

        where = self.where
        payload = porep_payload(request)
        source = f"{where} C1 output ({payload.form})"
        try:
            if payload.is_json:
                c1 = SealCommitPhase1Output.from_json(payload.c1, source=source)
            else:
                c1 = SealCommitPhase1Output.from_bincode(payload.c1, payload.proof, source=source)
            return PorepC2.from_c1(c1, prover_id=prover_id_from_miner(request.miner_id),
                                   sector_id=payload.sector_number)
        except InvalidRequestError:
            raise
        except CuzkError as err:
            raise _invalid(where, err) from None

    def mismatch_hint(self, request: ProofRequest, compound: Any, k: int, positions: list[int]) -> str:
        if positions[0] == 0:
            return (f"the C1 output's replica_id is not the one of sector {compound.sector_id} of miner "
                    f"{request.miner_id} (derived from the prover_id, sector number, ticket, comm_d and porep_id of "
                    f"{compound.registered_proof.name}): the C1 belongs to another miner or sector")
        return ("the C1 output's vanilla proofs open other nodes than the challenges derived from its replica_id and "
                "seed")


# -- PoSt -------------------------------------------------------------------------------------------

def _post_proof(request: ProofRequest, kind: CircuitKind, where: str) -> RegisteredPoStProof:
    ids = "0-4 (StackedDrgWinning<size>V1)" if kind is CircuitKind.WINNING else \
        "5-9 (StackedDrgWindow<size>V1) or 10-14 (on-chain V1_1 = proofs-api V1_2)"
    try:
        proof = post_proof(request.registered_proof)
    except CuzkError:
        raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof} is not a "
                                  f"RegisteredPoStProof; {where} takes {ids}") from None
    if proof.kind is not kind:
        other = "WinningPoSt" if proof.kind is CircuitKind.WINNING else "WindowPoSt"
        raise InvalidRequestError(f"{where}: registered_proof {proof.id} ({proof.name}) is a {other} proof; {where} "
                                  f"takes {ids}")
    _check_sector_size(request, proof.size, proof.name, where)
    return proof


def _post_public(request: ProofRequest, where: str) -> None:
    _canonical32(request.randomness, "randomness", where)
    prover_id_from_miner(request.miner_id)


def _read_sector_proofs(request: ProofRequest, proof: RegisteredPoStProof, challenges: int, where: str) -> list[Any]:
    from cuzk.filecoin.post import FallbackPoStSectorProof

    out = []
    for i, blob in enumerate(request.vanilla_proofs):
        try:
            out.append(FallbackPoStSectorProof.from_bincode(blob, proof.size, source=f"vanilla_proofs[{i}]",
                                                            challenges=challenges))
        except CuzkError as err:
            raise _invalid(where, err) from None
    return out


class WinningPostProvider(FilecoinProvider):
    """WINNING_POST: the selected sector's vanilla proof to one partition proof."""

    name = "filecoin-winning-post"
    kinds = (ProofKind.WINNING_POST,)
    family = CircuitKind.WINNING
    kind = ProofKind.WINNING_POST

    def _validate(self, request: ProofRequest) -> RegisteredPoStProof:
        where = self.where
        proof = _post_proof(request, CircuitKind.WINNING, where)
        _post_public(request, where)
        _check_vanilla_list(request, where, "FallbackPoStSectorProof", proof.sector_count, proof.sector_count,
                            post_sector_proof_bytes(proof.size, proof.challenge_count))
        return proof

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.WINNING, self._validate(request).size)

    def compound(self, request: ProofRequest) -> Any:
        from cuzk.circuits.filecoin.compound_post import WinningPoSt

        proof = self._validate(request)
        sector_proofs = _read_sector_proofs(request, proof, proof.challenge_count, self.where)
        try:
            return WinningPoSt.from_vanilla(sector_proofs, registered_proof=proof, randomness=request.randomness,
                                            prover_id=prover_id_from_miner(request.miner_id))
        except CuzkError as err:
            raise _invalid(self.where, err) from None

    def mismatch_hint(self, request: ProofRequest, compound: Any, k: int, positions: list[int]) -> str:
        return (f"the vanilla proof of sector {compound.sector_proof.sector_id} opens other leaves than the challenges "
                "derived from this randomness (was it generated for other randomness or another sector?)")


class WindowPostProvider(FilecoinProvider):
    """WINDOW_POST_PARTITION: one partition's sector proofs to one partition proof
    (`generate_single_window_post_with_vanilla`)."""

    name = "filecoin-window-post"
    kinds = (ProofKind.WINDOW_POST_PARTITION,)
    family = CircuitKind.WINDOW
    kind = ProofKind.WINDOW_POST_PARTITION

    def _validate(self, request: ProofRequest) -> RegisteredPoStProof:
        where = self.where
        proof = _post_proof(request, CircuitKind.WINDOW, where)
        _post_public(request, where)
        _check_vanilla_list(request, where, "FallbackPoStSectorProof", 1, proof.sector_count,
                            post_sector_proof_bytes(proof.size, proof.challenge_count))
        ids = [int.from_bytes(blob[:8], "little") for blob in request.vanilla_proofs]
        for i in range(1, len(ids)):
            if ids[i] <= ids[i - 1]:
                problem = "duplicate sector" if ids[i] == ids[i - 1] else "sectors out of order"
                raise InvalidRequestError(f"{where}: {problem} (vanilla_proofs[{i - 1}] is sector {ids[i - 1]}, "
                                          f"vanilla_proofs[{i}] sector {ids[i]}); sector proofs must be in strictly "
                                          "ascending sector id order, as the verifier lists them")
        return proof

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.WINDOW, self._validate(request).size)

    def compound(self, request: ProofRequest) -> Any:
        from cuzk.circuits.filecoin.compound_post import WindowPoSt

        proof = self._validate(request)
        sector_proofs = _read_sector_proofs(request, proof, proof.challenge_count, self.where)
        try:
            return WindowPoSt.from_vanilla(sector_proofs, registered_proof=proof, randomness=request.randomness,
                                           prover_id=prover_id_from_miner(request.miner_id),
                                           partition_index=request.partition_index)
        except CuzkError as err:
            raise _invalid(self.where, err) from None

    def mismatch_hint(self, request: ProofRequest, compound: Any, k: int, positions: list[int]) -> str:
        return ("the vanilla proofs open other leaves than the challenges derived from this randomness, the sector "
                f"ids and partition_index {request.partition_index} (generated for other randomness or another "
                "partition?)")


# -- SnapDeals --------------------------------------------------------------------------------------

class SnapProvider(FilecoinProvider):
    """SNAP_DEALS_UPDATE: the partition proofs of an update to its P partition proofs."""

    name = "filecoin-snap"
    kinds = (ProofKind.SNAP_DEALS_UPDATE,)
    family = CircuitKind.SNAP
    kind = ProofKind.SNAP_DEALS_UPDATE

    def _validate(self, request: ProofRequest) -> RegisteredUpdateProof:
        where = self.where
        try:
            proof = update_proof(request.registered_proof)
        except CuzkError:
            raise InvalidRequestError(f"{where}: registered_proof {request.registered_proof} is not a "
                                      f"RegisteredUpdateProof; {where} takes 0-4 (StackedDrg<size>V1: 2KiB, 8MiB, "
                                      "512MiB, 32GiB, 64GiB)") from None
        _check_sector_size(request, proof.size, proof.name, where)
        for name in ("comm_r_old", "comm_r_new", "comm_d_new"):
            _canonical32(getattr(request, name), name, where)
        parts = proof.size.snap_partitions
        _check_vanilla_list(request, where, "PartitionProof", parts, parts, snap_partition_proof_bytes(proof.size))
        return proof

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.SNAP, self._validate(request).size)

    def batchable(self, request: ProofRequest) -> bool:
        return True

    def compound(self, request: ProofRequest) -> Any:
        from cuzk.circuits.filecoin.compound_snap import SnapUpdate
        from cuzk.filecoin.snap import PartitionProof

        proof = self._validate(request)
        try:
            parts = [PartitionProof.from_bincode(blob, proof.size, source=f"vanilla_proofs[{i}]")
                     for i, blob in enumerate(request.vanilla_proofs)]
            return SnapUpdate.from_vanilla(parts, registered_proof=proof, comm_r_old=request.comm_r_old,
                                           comm_r_new=request.comm_r_new, comm_d_new=request.comm_d_new)
        except CuzkError as err:
            raise _invalid(self.where, err) from None


def filecoin_providers(param_cache: str | Path, *, compiled: CompiledStore | None = None,
                       sparse_products: str = "synthesis", device_witness: bool = False) -> list[CircuitProvider]:
    """The four Filecoin providers of a daemon whose parameters live in `param_cache`, sharing one
    compiled-circuit store (default: `<param_cache>/compiled/`, used when present, never built);
    `sparse_products` says where compiled circuits' a, b, c are computed ("synthesis" or "prover"),
    `device_witness` whether the prover's device writes their deferred gadgets' aux."""
    store = compiled if compiled is not None else CompiledStore(Path(param_cache) / "compiled")
    return [cls(param_cache, compiled=store, sparse_products=sparse_products, device_witness=device_witness)
            for cls in (PorepProvider, SnapProvider, WindowPostProvider, WinningPostProvider)]
