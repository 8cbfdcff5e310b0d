"""SealCommitPhase1Output ("C1") and the stacked vanilla proof types, with exact serde-JSON and bincode codecs.

Layouts (docs/formats.md §4, §5):

* JSON is what filecoin-ffi's `seal_commit_phase1` emits through serde_json: compact, keys in struct
  declaration order, every 32-byte value an array of 32 integers, enums externally tagged by their
  Rust variant names, `Column` carrying its PhantomData as `"_h": null`. :meth:`to_json` reproduces that
  byte for byte, so a parsed file re-serialises identically; the parser accepts keys in any order
  (Curio re-serialises alphabetically).
* bincode is the supraseal/Curio C1 form: filecoin-proofs v1's struct without `registered_proof` and
  without the size-keyed enum wrapper, so decoding needs the registered proof from the caller.

Parsers validate everything a C2 prover relies on — partition/challenge counts, column heights, 6 + 8
parent columns, 37 label parents, Merkle proof kinds and path lengths, canonical field elements — and
raise FormatError naming the JSON path or byte offset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cuzk.errors import CuzkError, FormatError
from cuzk.filecoin.codec import (
    BincodeReader,
    BincodeWriter,
    JsonReader,
    bytes_json,
    collector_paused,
    loads_in_pieces,
)
from cuzk.filecoin.merkle import MerkleProof, TreeLayout
from cuzk.filecoin.sizes import DRG_DEGREE, EXPANSION_DEGREE, TOTAL_PARENTS, RegisteredSealProof, seal_proof

__all__ = [
    "Column",
    "ColumnProof",
    "EncodingProof",
    "LabelingProof",
    "ReplicaColumnProof",
    "SealCommitPhase1Output",
    "VanillaStackedProof",
]


@dataclass(frozen=True)
class Column:
    """The labels of one node in every layer (layer 1 first)."""

    index: int
    rows: tuple[bytes, ...]


@dataclass(frozen=True)
class ColumnProof:
    column: Column
    inclusion_proof: MerkleProof  #: in tree_c


@dataclass(frozen=True)
class ReplicaColumnProof:
    c_x: ColumnProof
    drg_parents: tuple[ColumnProof, ...]  #: 6
    exp_parents: tuple[ColumnProof, ...]  #: 8


@dataclass(frozen=True)
class LabelingProof:
    """The 37 parent labels hashed into label(layer_index, node). EncodingProof has the same layout."""

    parents: tuple[bytes, ...]
    layer_index: int
    node: int


EncodingProof = LabelingProof


@dataclass(frozen=True)
class VanillaStackedProof:
    """One challenge's vanilla proof (rust `stacked::vanilla::Proof`)."""

    comm_d_proofs: MerkleProof
    comm_r_last_proof: MerkleProof
    replica_column_proofs: ReplicaColumnProof
    labeling_proofs: tuple[LabelingProof, ...]
    encoding_proof: LabelingProof

    @property
    def challenge(self) -> int:
        """The node C2 takes as this proof's challenge (labeling_proofs[0].node)."""
        return self.labeling_proofs[0].node if self.labeling_proofs else self.encoding_proof.node


# -- JSON ----------------------------------------------------------------------------------------------

def _column_proof_json(cp: ColumnProof) -> dict:
    return {"column": {"index": cp.column.index, "rows": [bytes_json(r) for r in cp.column.rows], "_h": None},
            "inclusion_proof": cp.inclusion_proof.to_json()}


def _labeling_json(lp: LabelingProof) -> dict:
    return {"parents": [bytes_json(p) for p in lp.parents], "layer_index": lp.layer_index, "node": lp.node}


def _proof_json(p: VanillaStackedProof) -> dict:
    rcp = p.replica_column_proofs
    return {
        "comm_d_proofs": p.comm_d_proofs.to_json(),
        "comm_r_last_proof": p.comm_r_last_proof.to_json(),
        "replica_column_proofs": {
            "c_x": _column_proof_json(rcp.c_x),
            "drg_parents": [_column_proof_json(c) for c in rcp.drg_parents],
            "exp_parents": [_column_proof_json(c) for c in rcp.exp_parents],
        },
        "labeling_proofs": [_labeling_json(lp) for lp in p.labeling_proofs],
        "encoding_proof": _labeling_json(p.encoding_proof),
    }


class _Shapes:
    """What every proof of one registered proof must look like; checks raise FormatError."""

    def __init__(self, proof: RegisteredSealProof) -> None:
        self.proof = proof
        self.layers = proof.size.layers
        self.tree_d = TreeLayout.tree_d(proof.size.nodes)
        self.tree_r = TreeLayout.tree_r(proof.size)

    def merkle(self, p: MerkleProof, layout: TreeLayout, source: str, where: str) -> MerkleProof:
        problem = p.shape_problem(layout)
        if problem:
            raise FormatError(f"Merkle proof {problem}", source=source, field=where)
        return p


def _column_proof_from_json(v: object, rd: JsonReader, sh: _Shapes, at: str) -> ColumnProof:
    v = rd.obj(v, at, ("column", "inclusion_proof"))
    col = rd.obj(v["column"], f"{at}.column", ("index", "rows"))
    column = Column(rd.uint(col["index"], f"{at}.column.index", 32),
                    rd.frs(col["rows"], f"{at}.column.rows", sh.layers))
    inc = MerkleProof.from_json(v["inclusion_proof"], rd, f"{at}.inclusion_proof")
    return ColumnProof(column, sh.merkle(inc, sh.tree_r, rd.source, f"{at}.inclusion_proof"))


def _labeling_from_json(v: object, rd: JsonReader, at: str) -> LabelingProof:
    v = rd.obj(v, at, ("parents", "layer_index", "node"))
    return LabelingProof(rd.frs(v["parents"], f"{at}.parents", TOTAL_PARENTS),
                         rd.uint(v["layer_index"], f"{at}.layer_index", 32), rd.uint(v["node"], f"{at}.node", 64))


def _proof_from_json(v: object, rd: JsonReader, sh: _Shapes, at: str) -> VanillaStackedProof:
    v = rd.obj(v, at, ("comm_d_proofs", "comm_r_last_proof", "replica_column_proofs", "labeling_proofs",
                       "encoding_proof"))
    comm_d = sh.merkle(MerkleProof.from_json(v["comm_d_proofs"], rd, f"{at}.comm_d_proofs"), sh.tree_d, rd.source,
                       f"{at}.comm_d_proofs")
    comm_r_last = sh.merkle(MerkleProof.from_json(v["comm_r_last_proof"], rd, f"{at}.comm_r_last_proof"),
                            sh.tree_r, rd.source, f"{at}.comm_r_last_proof")
    rat = f"{at}.replica_column_proofs"
    rcp = rd.obj(v["replica_column_proofs"], rat, ("c_x", "drg_parents", "exp_parents"))
    drg = rd.array(rcp["drg_parents"], f"{rat}.drg_parents", DRG_DEGREE)
    exp = rd.array(rcp["exp_parents"], f"{rat}.exp_parents", EXPANSION_DEGREE)
    replica = ReplicaColumnProof(
        _column_proof_from_json(rcp["c_x"], rd, sh, f"{rat}.c_x"),
        tuple(_column_proof_from_json(c, rd, sh, f"{rat}.drg_parents[{i}]") for i, c in enumerate(drg)),
        tuple(_column_proof_from_json(c, rd, sh, f"{rat}.exp_parents[{i}]") for i, c in enumerate(exp)))
    labeling = rd.array(v["labeling_proofs"], f"{at}.labeling_proofs", sh.layers)
    return VanillaStackedProof(
        comm_d, comm_r_last, replica,
        tuple(_labeling_from_json(lp, rd, f"{at}.labeling_proofs[{i}]") for i, lp in enumerate(labeling)),
        _labeling_from_json(v["encoding_proof"], rd, f"{at}.encoding_proof"))


# -- bincode -------------------------------------------------------------------------------------------

def _write_labeling(w: BincodeWriter, lp: LabelingProof) -> None:
    w.u64(len(lp.parents))
    for p in lp.parents:
        w.bytes32(p)
    w.u32(lp.layer_index)
    w.u64(lp.node)


def _write_column_proof(w: BincodeWriter, cp: ColumnProof) -> None:
    w.u32(cp.column.index)
    w.u64(len(cp.column.rows))
    for r in cp.column.rows:
        w.bytes32(r)
    cp.inclusion_proof.write_bincode(w)


def _write_proof(w: BincodeWriter, p: VanillaStackedProof) -> None:
    p.comm_d_proofs.write_bincode(w)
    p.comm_r_last_proof.write_bincode(w)
    rcp = p.replica_column_proofs
    _write_column_proof(w, rcp.c_x)
    w.u64(len(rcp.drg_parents))
    for c in rcp.drg_parents:
        _write_column_proof(w, c)
    w.u64(len(rcp.exp_parents))
    for c in rcp.exp_parents:
        _write_column_proof(w, c)
    w.u64(len(p.labeling_proofs))
    for lp in p.labeling_proofs:
        _write_labeling(w, lp)
    _write_labeling(w, p.encoding_proof)


def _read_labeling(r: BincodeReader, at: str) -> LabelingProof:
    n = r.length(f"{at}.parents.len", TOTAL_PARENTS)
    parents = tuple(r.fr(f"{at}.parents[{i}]") for i in range(n))
    return LabelingProof(parents, r.u32(f"{at}.layer_index"), r.u64(f"{at}.node"))


def _read_column_proof(r: BincodeReader, sh: _Shapes, at: str) -> ColumnProof:
    index = r.u32(f"{at}.column.index")
    n = r.length(f"{at}.column.rows.len", sh.layers)
    rows = tuple(r.fr(f"{at}.column.rows[{i}]") for i in range(n))
    return ColumnProof(Column(index, rows), MerkleProof.read_bincode(r, f"{at}.inclusion_proof", sh.tree_r))


def _read_proof(r: BincodeReader, sh: _Shapes, at: str) -> VanillaStackedProof:
    comm_d = MerkleProof.read_bincode(r, f"{at}.comm_d_proofs", sh.tree_d)
    comm_r_last = MerkleProof.read_bincode(r, f"{at}.comm_r_last_proof", sh.tree_r)
    rat = f"{at}.replica_column_proofs"
    c_x = _read_column_proof(r, sh, f"{rat}.c_x")
    drg = tuple(_read_column_proof(r, sh, f"{rat}.drg_parents[{i}]")
                for i in range(r.length(f"{rat}.drg_parents.len", DRG_DEGREE)))
    exp = tuple(_read_column_proof(r, sh, f"{rat}.exp_parents[{i}]")
                for i in range(r.length(f"{rat}.exp_parents.len", EXPANSION_DEGREE)))
    labeling = tuple(_read_labeling(r, f"{at}.labeling_proofs[{i}]")
                     for i in range(r.length(f"{at}.labeling_proofs.len", sh.layers)))
    return VanillaStackedProof(comm_d, comm_r_last, ReplicaColumnProof(c_x, drg, exp), labeling,
                               _read_labeling(r, f"{at}.encoding_proof"))


# -- the C1 output ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SealCommitPhase1Output:
    """rust-filecoin-proofs-api SealCommitPhase1Output: vanilla_proofs[partition][challenge] + public values."""

    registered_proof: RegisteredSealProof
    vanilla_proofs: tuple[tuple[VanillaStackedProof, ...], ...]
    comm_r: bytes
    comm_d: bytes
    replica_id: bytes
    seed: bytes
    ticket: bytes

    @property
    def size_variant(self) -> str:
        """The VanillaSealProof enum variant: keyed by size only (`StackedDrg32GiBV1`)."""
        return f"StackedDrg{self.registered_proof.size.name}V1"

    def to_json_value(self) -> dict:
        return {
            "registered_proof": self.registered_proof.name,
            "vanilla_proofs": {self.size_variant: [[_proof_json(p) for p in part] for part in self.vanilla_proofs]},
            "comm_r": bytes_json(self.comm_r),
            "comm_d": bytes_json(self.comm_d),
            "replica_id": bytes_json(self.replica_id),
            "seed": bytes_json(self.seed),
            "ticket": bytes_json(self.ticket),
        }

    def to_json(self) -> str:
        """Compact serde_json text, byte-identical to filecoin-ffi's output for the same values."""
        return json.dumps(self.to_json_value(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "<C1 JSON>") -> SealCommitPhase1Output:
        with collector_paused():
            return cls._from_json(text, source)

    @classmethod
    def _from_json(cls, text: str | bytes, source: str) -> SealCommitPhase1Output:
        try:
            # Down to each challenge's proof ($.vanilla_proofs.<variant>[k][i]) in pieces: a daemon plans
            # in its own process, whose other threads would otherwise wait out the whole parse.
            value = loads_in_pieces(text, depth=4)
        except (ValueError, RecursionError) as err:  # also over-long numbers and too deep nesting
            raise FormatError(f"not valid JSON: {err}", source=source) from None
        rd = JsonReader(source)
        top = rd.obj(value, "$", ("registered_proof", "vanilla_proofs", "comm_r", "comm_d", "replica_id", "seed",
                                  "ticket"))
        name = top["registered_proof"]
        if not isinstance(name, str):
            raise rd.error("expected a registered seal proof name", "$.registered_proof")
        try:
            proof = seal_proof(name)
        except CuzkError:
            raise rd.error(f"unknown registered seal proof {name!r}", "$.registered_proof") from None
        sh = _Shapes(proof)
        expected_variant = f"StackedDrg{proof.size.name}V1"
        variant, parts = rd.variant(top["vanilla_proofs"], "$.vanilla_proofs", (expected_variant,))
        parts = rd.array(parts, f"$.vanilla_proofs.{variant}", proof.partitions)
        vanilla = []
        for k, part in enumerate(parts):
            pat = f"$.vanilla_proofs.{variant}[{k}]"
            part = rd.array(part, pat, proof.challenges_per_partition)
            vanilla.append(tuple(_proof_from_json(p, rd, sh, f"{pat}[{i}]") for i, p in enumerate(part)))
        return cls(proof, tuple(vanilla), rd.fr(top["comm_r"], "$.comm_r"), rd.fr(top["comm_d"], "$.comm_d"),
                   rd.fr(top["replica_id"], "$.replica_id"), rd.bytes32(top["seed"], "$.seed"),
                   rd.bytes32(top["ticket"], "$.ticket"))

    def to_bincode(self) -> bytes:
        """supraseal/Curio bincode C1 (no registered_proof, no enum wrapper)."""
        w = BincodeWriter()
        w.u64(len(self.vanilla_proofs))
        for part in self.vanilla_proofs:
            w.u64(len(part))
            for p in part:
                _write_proof(w, p)
        for v in (self.comm_r, self.comm_d, self.replica_id, self.seed, self.ticket):
            w.bytes32(v)
        return w.getvalue()

    @classmethod
    def from_bincode(cls, data: bytes, registered_proof: RegisteredSealProof | int | str,
                     source: str = "<C1 bincode>") -> SealCommitPhase1Output:
        """Decode bincode C1; the format does not record the proof type, so the caller names it."""
        proof = registered_proof if isinstance(registered_proof, RegisteredSealProof) else seal_proof(registered_proof)
        sh = _Shapes(proof)
        r = BincodeReader(data, source)
        parts = []
        for k in range(r.length("vanilla_proofs.len", proof.partitions)):
            count = r.length(f"vanilla_proofs[{k}].len", proof.challenges_per_partition)
            parts.append(tuple(_read_proof(r, sh, f"vanilla_proofs[{k}][{i}]") for i in range(count)))
        comm_r = r.fr("comm_r")
        comm_d = r.fr("comm_d")
        rid = r.fr("replica_id")
        seed = r.bytes32("seed")
        ticket = r.bytes32("ticket")
        r.finish()
        return cls(proof, tuple(parts), comm_r, comm_d, rid, seed, ticket)
