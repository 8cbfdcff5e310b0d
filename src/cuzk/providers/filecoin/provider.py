"""Filecoin circuit providers: PoRep C2, WinningPoSt, WindowPoSt and SnapDeals requests as engine jobs.

Each provider turns one SubmitProofRequest, exactly as Curio sends it (docs/protocol.md §3), into
the partitions of the matching compound proof (`cuzk.circuits.filecoin.compound*`): the payload of
each kind and its submit-time checks are in `payload.py`, the partition recipe in `recipe.py`.

`circuit_id` (at submit) runs the payload checks; `plan` (on a planning thread) parses everything,
builds the compound proof (which checks the Merkle shapes and roots), derives each partition's
public inputs from public data only, and compares them with the inputs the witness will expose, so
a C1 made for another miner or sector, or PoSt openings of other randomness, fail with a reason
before any synthesis.

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
Without the file, `KNOWN_SHAPES` is the shape (how it was obtained: `cuzk.circuits.filecoin.shapes`).

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

That is the constraint-system path. The providers' circuits may be compiled (`compiled_circuits`;
`build_size` says what building one takes): with a ready compiled circuit and a budget that cannot
hold the constraint-system estimate, the engine reserves `PartitionEstimate.compiled` instead (witness
and generator temporaries, the witness or a, b, c in shared memory, and the host side of the prover:
~23 GB for porep-32g with a GPU prover computing the products) and pins the partitions to the compiled
path (`cuzk.engine.compiled_recipe`: no fallback that would outgrow the reservation).
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from pathlib import Path
from typing import Any

from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
from cuzk.engine.jobs import Priority, ProofRequest, RequestPayload
from cuzk.engine.providers import (
    BuildSize,
    CircuitProvider,
    InvalidRequestError,
    JobPlan,
    PartitionPlan,
    SrsSource,
    WorkerCall,
)
from cuzk.errors import CuzkError
from cuzk.filecoin.codec import collector_paused
from cuzk.filecoin.sizes import (
    CircuitKind,
    RegisteredPoStProof,
    RegisteredUpdateProof,
    parameter_file_name,
    parse_circuit_id,
)
from cuzk.filecoin.sizes import circuit_id as fc_circuit_id
from cuzk.kinds import ProofKind
from cuzk.providers.fields import SubmitFields, fields_of
from cuzk.providers.filecoin.payload import (
    invalid,
    porep_payload,
    prover_id_from_miner,
    read_sector_proofs,
    snap_update_proof,
    window_post_proof,
    winning_post_proof,
)
from cuzk.providers.filecoin.recipe import FilecoinPartitionRecipe, differences
from cuzk.r1cs import CircuitShape

log = logging.getLogger("cuzk.providers.filecoin")

__all__ = [
    "MissingParametersError",
    "PorepProvider",
    "SnapProvider",
    "WindowPostProvider",
    "WinningPostProvider",
    "build_size",
    "filecoin_circuit_shape",
    "filecoin_providers",
    "shape_from_layout",
]


class MissingParametersError(CuzkError):
    """A Filecoin parameter file is not in srs.param_cache (the job fails; the request was fine)."""


# -- shapes ---------------------------------------------------------------------------------------

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


class FilecoinProvider(CircuitProvider):
    """What the four kinds share: the request's fields (`SubmitFields`), parameter files, shapes,
    planning from a compound proof. Each kind's `default_priority` is the Rust daemon's
    (docs/compatibility.md §4)."""

    family: CircuitKind
    kind: ProofKind
    compiled_circuits = True

    def __init__(self, param_cache: str | Path) -> None:
        self.param_cache = Path(param_cache)

    @property
    def where(self) -> str:
        return self.kind.proto_name

    # -- the request ------------------------------------------------------------------------------
    def payload_from_message(self, kind: ProofKind, message: Any) -> RequestPayload:
        """The SubmitProofRequest's fields as sent; `circuit_id` checks those of this kind at submit."""
        return SubmitFields.from_message(kind, message)

    def decode_payload(self, kind: ProofKind, data: bytes) -> RequestPayload:
        return SubmitFields.decode(kind, data)

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

    def build_size(self, circuit_id: str) -> BuildSize | None:
        return build_size(circuit_id)

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
    def compound(self, fields: SubmitFields) -> Any:
        """The request's `CompoundProof`, fully parsed and checked (InvalidRequestError with the reason)."""

    def mismatch_hint(self, fields: SubmitFields, compound: Any, k: int, positions: list[int]) -> str:
        """Why partition k's witness would expose other inputs than the public data imply."""
        return "the vanilla proofs do not answer the challenges the public data imply"

    def plan(self, request: ProofRequest) -> JobPlan:
        cid = self.circuit_id(request)
        self.require_params(cid)
        fields = fields_of(request)
        with collector_paused():  # vanilla proofs decode into millions of acyclic objects (codec.collector_paused)
            compound = self.compound(fields)
        partitions = []
        for k in range(compound.partition_count):
            inputs = compound.public_inputs(k)
            positions = differences(compound.witness_public_inputs(k), inputs)
            if positions:
                hint = self.mismatch_hint(fields, compound, k, positions)
                raise InvalidRequestError(f"{self.where}: partition {k}: {hint} ({len(positions)} of {len(inputs)} "
                                          f"public inputs differ, first at position {positions[0]})")
            recipe = FilecoinPartitionRecipe(cid, k, compound.partition_circuit(k), tuple(inputs),
                                             f"{request.request_id} partition {k}")
            partitions.append(PartitionPlan(k, recipe, inputs))
        return JobPlan(cid, partitions)


# -- PoRep ------------------------------------------------------------------------------------------

class PorepProvider(FilecoinProvider):
    """POREP_SEAL_COMMIT: a C1 output to the P partition proofs of `seal_commit_phase2`."""

    name = "filecoin-porep"
    kinds = (ProofKind.POREP_SEAL_COMMIT,)
    family = CircuitKind.POREP
    kind = ProofKind.POREP_SEAL_COMMIT
    default_priority = Priority.NORMAL

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.POREP, porep_payload(fields_of(request)).proof.size)

    def batchable(self, request: ProofRequest) -> bool:
        return True

    def compound(self, fields: SubmitFields) -> Any:
        from cuzk.circuits.filecoin.compound_porep import PorepC2
        from cuzk.filecoin.c1 import SealCommitPhase1Output

        where = self.where
        payload = porep_payload(fields)
        source = f"{where} C1 output ({payload.form})"
        try:
            if payload.is_json:
                c1 = SealCommitPhase1Output.from_json(payload.c1, source=source)
            else:
                c1 = SealCommitPhase1Output.from_bincode(payload.c1, payload.proof, source=source)
            return PorepC2.from_c1(c1, prover_id=prover_id_from_miner(fields.miner_id),
                                   sector_id=payload.sector_number)
        except InvalidRequestError:
            raise
        except CuzkError as err:
            raise invalid(where, err) from None

    def mismatch_hint(self, fields: SubmitFields, compound: Any, k: int, positions: list[int]) -> str:
        if positions[0] == 0:
            return (f"the C1 output's replica_id is not the one of sector {compound.sector_id} of miner "
                    f"{fields.miner_id} (derived from the prover_id, sector number, ticket, comm_d and porep_id of "
                    f"{compound.registered_proof.name}): the C1 belongs to another miner or sector")
        return ("the C1 output's vanilla proofs open other nodes than the challenges derived from its replica_id and "
                "seed")


# -- PoSt -------------------------------------------------------------------------------------------

class WinningPostProvider(FilecoinProvider):
    """WINNING_POST: the selected sector's vanilla proof to one partition proof."""

    name = "filecoin-winning-post"
    kinds = (ProofKind.WINNING_POST,)
    family = CircuitKind.WINNING
    kind = ProofKind.WINNING_POST
    default_priority = Priority.CRITICAL

    def _validate(self, fields: SubmitFields) -> RegisteredPoStProof:
        return winning_post_proof(fields)

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.WINNING, self._validate(fields_of(request)).size)

    def compound(self, fields: SubmitFields) -> Any:
        from cuzk.circuits.filecoin.compound_post import WinningPoSt

        proof = self._validate(fields)
        sector_proofs = read_sector_proofs(fields, proof, proof.challenge_count, self.where)
        try:
            return WinningPoSt.from_vanilla(sector_proofs, registered_proof=proof, randomness=fields.randomness,
                                            prover_id=prover_id_from_miner(fields.miner_id))
        except CuzkError as err:
            raise invalid(self.where, err) from None

    def mismatch_hint(self, fields: SubmitFields, compound: Any, k: int, positions: list[int]) -> str:
        return (f"the vanilla proof of sector {compound.sector_proof.sector_id} opens other leaves than the challenges "
                "derived from this randomness (was it generated for other randomness or another sector?)")


class WindowPostProvider(FilecoinProvider):
    """WINDOW_POST_PARTITION: one partition's sector proofs to one partition proof
    (`generate_single_window_post_with_vanilla`)."""

    name = "filecoin-window-post"
    kinds = (ProofKind.WINDOW_POST_PARTITION,)
    family = CircuitKind.WINDOW
    kind = ProofKind.WINDOW_POST_PARTITION
    default_priority = Priority.HIGH

    def _validate(self, fields: SubmitFields) -> RegisteredPoStProof:
        return window_post_proof(fields)

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.WINDOW, self._validate(fields_of(request)).size)

    def compound(self, fields: SubmitFields) -> Any:
        from cuzk.circuits.filecoin.compound_post import WindowPoSt
        from cuzk.filecoin.merkle import TreeLayout
        from cuzk.filecoin.post_arrays import decode_sector_proofs

        proof = self._validate(fields)
        # Arrays at once (a 32GiB partition's proofs in a fraction of the time Python objects take,
        # benchmarks/HISTORY.md); proofs that do not decode so are read one by one, whose errors name the
        # proof and field.
        sector_proofs: Any = decode_sector_proofs(fields.vanilla_proofs, TreeLayout.tree_r(proof.size),
                                                  proof.challenge_count)
        if sector_proofs is None:
            sector_proofs = read_sector_proofs(fields, proof, proof.challenge_count, self.where)
        try:
            return WindowPoSt.from_vanilla(sector_proofs, registered_proof=proof, randomness=fields.randomness,
                                           prover_id=prover_id_from_miner(fields.miner_id),
                                           partition_index=fields.partition_index)
        except CuzkError as err:
            raise invalid(self.where, err) from None

    def mismatch_hint(self, fields: SubmitFields, compound: Any, k: int, positions: list[int]) -> str:
        return ("the vanilla proofs open other leaves than the challenges derived from this randomness, the sector "
                f"ids and partition_index {fields.partition_index} (generated for other randomness or another "
                "partition?)")


# -- SnapDeals --------------------------------------------------------------------------------------

class SnapProvider(FilecoinProvider):
    """SNAP_DEALS_UPDATE: the partition proofs of an update to its P partition proofs."""

    name = "filecoin-snap"
    kinds = (ProofKind.SNAP_DEALS_UPDATE,)
    family = CircuitKind.SNAP
    kind = ProofKind.SNAP_DEALS_UPDATE
    default_priority = Priority.NORMAL

    def _validate(self, fields: SubmitFields) -> RegisteredUpdateProof:
        return snap_update_proof(fields)

    def circuit_id(self, request: ProofRequest) -> str:
        return fc_circuit_id(CircuitKind.SNAP, self._validate(fields_of(request)).size)

    def batchable(self, request: ProofRequest) -> bool:
        return True

    def compound(self, fields: SubmitFields) -> Any:
        from cuzk.circuits.filecoin.compound_snap import SnapUpdate
        from cuzk.filecoin.snap import PartitionProof

        proof = self._validate(fields)
        try:
            parts = [PartitionProof.from_bincode(blob, proof.size, source=f"vanilla_proofs[{i}]")
                     for i, blob in enumerate(fields.vanilla_proofs)]
            return SnapUpdate.from_vanilla(parts, registered_proof=proof, comm_r_old=fields.comm_r_old,
                                           comm_r_new=fields.comm_r_new, comm_d_new=fields.comm_d_new)
        except CuzkError as err:
            raise invalid(self.where, err) from None


def filecoin_providers(param_cache: str | Path) -> list[CircuitProvider]:
    """The four Filecoin providers of a daemon whose parameters live in `param_cache`."""
    return [cls(param_cache) for cls in (PorepProvider, SnapProvider, WindowPostProvider, WinningPostProvider)]
