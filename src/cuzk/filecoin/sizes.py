"""Per-size parameters, registered proof ids, porep_id and parameter file names (docs/circuits.md §2).

Why a table *and* rules: the published sizes are fixed by constants.rs, but several columns follow
simple rules (SnapDeals partitions, challenges ceil(min/partitions), ...). The table is written out
literally so that it can be read against the spec; the tests re-derive it from the rules.

Parameter file names are computed from rust-fil-proofs' identifier strings, exactly as
`parameter_cache.rs` does: `v28-<prefix>-<hex sha256(identifier)>`. Because the identifiers do not
contain an api version or feature, every seal proof of one size shares one `.params` file.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass

from cuzk.errors import CuzkError

__all__ = [
    "ALL_SIZES",
    "PARAMETER_VERSION",
    "ApiVersion",
    "CircuitKind",
    "RegisteredPoStProof",
    "RegisteredSealProof",
    "RegisteredUpdateProof",
    "SectorParams",
    "TreeShape",
    "circuit_id",
    "parameter_cache_id",
    "parameter_file_name",
    "parameter_identifier",
    "parse_circuit_id",
    "porep_id",
    "post_proof",
    "seal_proof",
    "sector_params",
    "update_proof",
]

#: storage-proofs-core parameter_cache.rs VERSION: the `v28-` of every file name.
PARAMETER_VERSION = 28

WINNING_POST_CHALLENGES = 66
WINNING_POST_SECTORS = 1
WINDOW_POST_CHALLENGES = 10
DRG_DEGREE = 6
EXPANSION_DEGREE = 8
TOTAL_PARENTS = 37
MAX_CHALLENGES_PER_PARTITION = 18


class ApiVersion(enum.Enum):
    """rust-fil-proofs ApiVersion: selects the graph's parent order and the PoSt challenge indexing."""

    V1_0_0 = "1.0.0"
    V1_1_0 = "1.1.0"
    V1_2_0 = "1.2.0"


class CircuitKind(enum.Enum):
    """The four Groth16 circuits Filecoin publishes parameters for."""

    POREP = "porep"
    WINNING = "winning"
    WINDOW = "wpost"
    SNAP = "snap"


@dataclass(frozen=True)
class TreeShape:
    """Poseidon tree shape base-sub-top (0 = level absent), e.g. 8-8-2 for 64GiB."""

    base: int
    sub: int
    top: int

    def __str__(self) -> str:
        return f"{self.base}-{self.sub}-{self.top}"

    @property
    def base_tree_count(self) -> int:
        return max(self.sub, 1) * max(self.top, 1)


@dataclass(frozen=True)
class SectorParams:
    """Everything size-dependent that vanilla proofs, circuits and file names need (docs/circuits.md §2)."""

    name: str  #: "2KiB" ... "64GiB"
    short: str  #: circuit-id token: "2k", "8m", "512m", "32g", "64g"
    index: int  #: position 0..4 in the registered-proof enums
    sector_bytes: int
    layers: int
    tree_shape: TreeShape
    porep_partitions: int
    porep_min_challenges: int
    ni_partitions: int
    ni_min_challenges: int
    window_post_sectors: int  #: WindowPoSt sectors per partition
    snap_partitions: int
    snap_challenges: int  #: per partition
    snap_hs: tuple[int, ...]
    snap_apex_leaves: int

    @property
    def nodes(self) -> int:
        return self.sector_bytes // 32

    @property
    def log2_nodes(self) -> int:
        return self.nodes.bit_length() - 1

    @property
    def porep_challenges(self) -> int:
        """Challenges per PoRep partition = ceil(min / partitions), at most 18."""
        return min(-(-self.porep_min_challenges // self.porep_partitions), MAX_CHALLENGES_PER_PARTITION)

    @property
    def ni_challenges(self) -> int:
        return min(-(-self.ni_min_challenges // self.ni_partitions), MAX_CHALLENGES_PER_PARTITION)

    @property
    def column_arity(self) -> int:
        """tree_c column hash arity = number of layers."""
        return self.layers

    @property
    def base_tree_count(self) -> int:
        return self.tree_shape.base_tree_count

    @property
    def base_tree_leaves(self) -> int:
        return self.nodes // self.base_tree_count

    @property
    def base_path_length(self) -> int:
        """Arity-8 levels inside one base tree."""
        return (self.base_tree_leaves.bit_length() - 1) // 3

    @property
    def tree_d_depth(self) -> int:
        return self.log2_nodes

    @property
    def snap_h(self) -> int:
        """h_default = hs[3]."""
        return self.snap_hs[3]

    @property
    def winning_post_challenges(self) -> int:
        return WINNING_POST_CHALLENGES

    @property
    def window_post_challenges(self) -> int:
        return WINDOW_POST_CHALLENGES


# SnapDeals rules by node count (storage-proofs-update constants.rs); they also cover the test sizes.
def snap_partitions(nodes: int) -> int:
    return 1 if nodes <= 1 << 8 else 2 if nodes <= 1 << 10 else 4 if nodes <= 1 << 19 else 16


def snap_challenges(nodes: int) -> int:
    return 10 if nodes <= 1 << 19 else 86


def snap_hs(nodes: int) -> tuple[int, ...]:
    return (1,) * 6 if nodes <= 1 << 10 else (7, 8, 9, 10, 11, 12)


def snap_apex(nodes: int) -> int:
    return 8 if nodes <= 1 << 8 else 128


def _size(name: str, short: str, index: int, sector_bytes: int, layers: int, shape: TreeShape, partitions: int,
          min_challenges: int, ni_partitions: int, ni_min: int, window_sectors: int) -> SectorParams:
    nodes = sector_bytes // 32
    return SectorParams(name=name, short=short, index=index, sector_bytes=sector_bytes, layers=layers,
                        tree_shape=shape, porep_partitions=partitions, porep_min_challenges=min_challenges,
                        ni_partitions=ni_partitions, ni_min_challenges=ni_min, window_post_sectors=window_sectors,
                        snap_partitions=snap_partitions(nodes), snap_challenges=snap_challenges(nodes),
                        snap_hs=snap_hs(nodes), snap_apex_leaves=snap_apex(nodes))


ALL_SIZES: tuple[SectorParams, ...] = (
    _size("2KiB", "2k", 0, 2 << 10, 2, TreeShape(8, 0, 0), 1, 2, 13, 26, 2),
    _size("8MiB", "8m", 1, 8 << 20, 2, TreeShape(8, 0, 0), 1, 2, 13, 26, 2),
    _size("512MiB", "512m", 2, 512 << 20, 2, TreeShape(8, 0, 0), 1, 2, 13, 26, 2),
    _size("32GiB", "32g", 3, 32 << 30, 11, TreeShape(8, 8, 0), 10, 176, 126, 2253, 2349),
    _size("64GiB", "64g", 4, 64 << 30, 11, TreeShape(8, 8, 2), 10, 176, 126, 2253, 2300),
)

_BY_KEY: dict[str, SectorParams] = {}
for _p in ALL_SIZES:
    for _key in (_p.name, _p.name.lower(), _p.short, str(_p.sector_bytes)):
        _BY_KEY[_key] = _p


def sector_params(size: int | str) -> SectorParams:
    """Look a published size up by bytes (2048), name ("2KiB", any case) or short token ("2k")."""
    key = str(size).strip()
    params = _BY_KEY.get(key) or _BY_KEY.get(key.lower())
    if params is None:
        known = ", ".join(p.name for p in ALL_SIZES)
        raise CuzkError(f"unknown sector size {size!r}; published sizes are {known} (or their byte counts)")
    return params


# -- registered proofs (docs/circuits.md §3) ----------------------------------------------------------

@dataclass(frozen=True)
class RegisteredSealProof:
    """One RegisteredSealProof: its on-chain id doubles as the porep registered-proof id."""

    id: int
    name: str  #: rust-filecoin-proofs-api variant name, as in serde JSON
    size: SectorParams
    api_version: ApiVersion
    feature: str | None  #: None, "SyntheticPoRep" or "NonInteractivePoRep"

    @property
    def porep_id(self) -> bytes:
        return porep_id(self.id)

    @property
    def is_legacy(self) -> bool:
        return self.id <= 4

    @property
    def synthetic(self) -> bool:
        return self.feature == "SyntheticPoRep"

    @property
    def non_interactive(self) -> bool:
        return self.feature == "NonInteractivePoRep"

    @property
    def partitions(self) -> int:
        return self.size.ni_partitions if self.non_interactive else self.size.porep_partitions

    @property
    def challenges_per_partition(self) -> int:
        return self.size.ni_challenges if self.non_interactive else self.size.porep_challenges


@dataclass(frozen=True)
class RegisteredPoStProof:
    """One RegisteredPoStProof. `name` is the rust-filecoin-proofs-api name (ids 10..14 are `...V1_2`
    there, `...V1_1` on chain and in filecoin-ffi)."""

    id: int
    name: str
    chain_name: str
    size: SectorParams
    kind: CircuitKind  #: WINNING or WINDOW
    api_version: ApiVersion

    @property
    def sector_count(self) -> int:
        """Sectors per partition as the FFI sees them (Winning: 1 real sector)."""
        return WINNING_POST_SECTORS if self.kind is CircuitKind.WINNING else self.size.window_post_sectors

    @property
    def challenge_count(self) -> int:
        """Leaf challenges per sector."""
        return WINNING_POST_CHALLENGES if self.kind is CircuitKind.WINNING else WINDOW_POST_CHALLENGES


@dataclass(frozen=True)
class RegisteredUpdateProof:
    """One RegisteredUpdateProof (SnapDeals); all are api version 1.1.0."""

    id: int
    name: str
    size: SectorParams
    api_version: ApiVersion = ApiVersion.V1_1_0


def _seal_proofs() -> tuple[RegisteredSealProof, ...]:
    out = []
    groups = (("V1", ApiVersion.V1_0_0, None), ("V1_1", ApiVersion.V1_1_0, None),
              ("V1_1_Feat_SyntheticPoRep", ApiVersion.V1_2_0, "SyntheticPoRep"),
              ("V1_2_Feat_NonInteractivePoRep", ApiVersion.V1_2_0, "NonInteractivePoRep"))
    for g, (suffix, version, feature) in enumerate(groups):
        for s in ALL_SIZES:
            out.append(RegisteredSealProof(5 * g + s.index, f"StackedDrg{s.name}{suffix}", s, version, feature))
    return tuple(out)


def _post_proofs() -> tuple[RegisteredPoStProof, ...]:
    out = []
    groups = ((CircuitKind.WINNING, "Winning", "V1", "V1", ApiVersion.V1_0_0),
              (CircuitKind.WINDOW, "Window", "V1", "V1", ApiVersion.V1_0_0),
              (CircuitKind.WINDOW, "Window", "V1_2", "V1_1", ApiVersion.V1_2_0))
    for g, (kind, word, suffix, chain_suffix, version) in enumerate(groups):
        for s in ALL_SIZES:
            out.append(RegisteredPoStProof(5 * g + s.index, f"StackedDrg{word}{s.name}{suffix}",
                                           f"StackedDrg{word}{s.name}{chain_suffix}", s, kind, version))
    return tuple(out)


SEAL_PROOFS: tuple[RegisteredSealProof, ...] = _seal_proofs()
POST_PROOFS: tuple[RegisteredPoStProof, ...] = _post_proofs()
UPDATE_PROOFS: tuple[RegisteredUpdateProof, ...] = tuple(
    RegisteredUpdateProof(s.index, f"StackedDrg{s.name}V1", s) for s in ALL_SIZES)


def _lookup(table: tuple, key: int | str, what: str):  # type: ignore[no-untyped-def]
    for entry in table:
        if key in (entry.id, entry.name) or key == getattr(entry, "chain_name", None):
            return entry
    raise CuzkError(f"unknown {what} {key!r}; known: {', '.join(e.name for e in table)}")


def seal_proof(key: int | str) -> RegisteredSealProof:
    """A RegisteredSealProof by id (0..19) or serde name (e.g. "StackedDrg32GiBV1_1")."""
    return _lookup(SEAL_PROOFS, key, "registered seal proof")


def post_proof(key: int | str) -> RegisteredPoStProof:
    """A RegisteredPoStProof by id (0..14), serde name or chain name."""
    return _lookup(POST_PROOFS, key, "registered PoSt proof")


def update_proof(key: int | str) -> RegisteredUpdateProof:
    """A RegisteredUpdateProof by id (0..4) or name."""
    return _lookup(UPDATE_PROOFS, key, "registered update proof")


def porep_id(registered_id: int, nonce: int = 0) -> bytes:
    """porep_id = id u64 LE ‖ nonce u64 LE ‖ 16 zero bytes (docs/circuits.md §3)."""
    return registered_id.to_bytes(8, "little") + nonce.to_bytes(8, "little") + bytes(16)


# -- circuit ids and parameter file names (docs/circuits.md §3) ----------------------------------------

def circuit_id(kind: CircuitKind | str, size: SectorParams | int | str) -> str:
    """`porep-32g`, `winning-2k`, `wpost-8m`, `snap-64g`, ..."""
    kind = CircuitKind(kind)
    params = size if isinstance(size, SectorParams) else sector_params(size)
    return f"{kind.value}-{params.short}"


def parse_circuit_id(cid: str) -> tuple[CircuitKind, SectorParams]:
    """Inverse of :func:`circuit_id`; raises CuzkError naming the accepted forms."""
    kind_s, _, size_s = cid.partition("-")
    try:
        kind = CircuitKind(kind_s)
    except ValueError:
        raise CuzkError(f"unknown Filecoin circuit id {cid!r}: kind must be one of "
                        f"{', '.join(k.value for k in CircuitKind)}") from None
    for p in ALL_SIZES:
        if p.short == size_s:
            return kind, p
    raise CuzkError(f"unknown Filecoin circuit id {cid!r}: size must be one of {', '.join(p.short for p in ALL_SIZES)}")


def parameter_identifier(kind: CircuitKind | str, size: SectorParams | int | str) -> str:
    """The exact `ParameterSetMetadata::identifier()` string whose SHA-256 names the file."""
    kind = CircuitKind(kind)
    p = size if isinstance(size, SectorParams) else sector_params(size)
    if kind is CircuitKind.POREP:
        graph = (f"stacked_graph::StackedGraph{{expansion_degree: {EXPANSION_DEGREE} base_graph: "
                 f"drgraph::BucketGraph{{size: {p.nodes}; degree: {DRG_DEGREE}; hasher: poseidon_hasher}} }}")
        return (f"layered_drgporep::PublicParams{{ graph: {graph}, challenges: LayerChallenges {{ layers: "
                f"{p.layers}, max_count: {p.porep_challenges} }}, tree: merkletree-poseidon_hasher-{p.tree_shape} }}")
    if kind is CircuitKind.SNAP:
        return f"empty_sector_update::PublicParams{{ sector_nodes: {p.nodes} }}"
    challenges, sectors = ((1, WINNING_POST_CHALLENGES) if kind is CircuitKind.WINNING
                           else (WINDOW_POST_CHALLENGES, p.window_post_sectors))
    return (f"FallbackPoSt::PublicParams{{sector_size: {p.sector_bytes}, challenge_count: {challenges}, "
            f"sector_count: {sectors}}}")


def _prefix(kind: CircuitKind, p: SectorParams, snap_poseidon: bool) -> str:
    tree = f"merkletree-poseidon_hasher-{p.tree_shape}"
    if kind is CircuitKind.POREP:
        return f"stacked-proof-of-replication-{tree}-sha256_hasher"
    if kind is CircuitKind.SNAP:
        return f"empty-sector-update-{'poseidon-' if snap_poseidon else ''}{tree}"
    return f"proof-of-spacetime-fallback-{tree}"


def parameter_cache_id(kind: CircuitKind | str, size: SectorParams | int | str, *, snap_poseidon: bool = False) -> str:
    """`<prefix>-<hex sha256(identifier)>`, e.g. `stacked-proof-of-replication-...-82a357d2...`.

    `snap_poseidon` selects the published but unused "empty-sector-update-poseidon" variant (same hash).
    """
    kind = CircuitKind(kind)
    p = size if isinstance(size, SectorParams) else sector_params(size)
    digest = hashlib.sha256(parameter_identifier(kind, p).encode()).hexdigest()
    return f"{_prefix(kind, p, snap_poseidon and kind is CircuitKind.SNAP)}-{digest}"


def parameter_file_name(kind: CircuitKind | str, size: SectorParams | int | str, ext: str = "params", *,
                        snap_poseidon: bool = False) -> str:
    """`v28-<cache id>.<ext>` with ext in params / vk / meta."""
    if ext not in ("params", "vk", "meta"):
        raise CuzkError(f"parameter file extension must be params, vk or meta, got {ext!r}")
    return f"v{PARAMETER_VERSION}-{parameter_cache_id(kind, size, snap_poseidon=snap_poseidon)}.{ext}"
