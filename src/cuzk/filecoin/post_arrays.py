"""Many PoSt sector proofs of one layout decoded at once into arrays (`PoStOpenings`).

A WindowPoSt-32GiB partition arrives as 2,349 bincode `FallbackPoStSectorProof`s of 24,960 bytes,
1.67M field elements in all. Decoded one value at a time (`FallbackPoStSectorProof.from_bincode`)
they become millions of Python objects, which the daemon then checks, pickles to a synthesis
process and turns back into limb arrays there: seconds of CPU on the request's path. Every proof of
a layout has the same bytes at the same offsets but for its values, so here they are read as one
(n, bytes) array: the fixed bytes (enum tags, vector lengths) compared with a template, the field
elements viewed as little-endian uint64 limbs (their bincode form is their limb form), the
positions and the canonical-element rule checked in a few vector operations.

A batch that fails any check is not reported from here: `decode_sector_proofs` returns None and the
caller decodes proof by proof, whose errors name the proof, field and offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from cuzk.field.limbs import check_canonical
from cuzk.filecoin.merkle import MerkleProof, PathElement, TreeLayout

__all__ = ["PoStOpenings", "decode_sector_proofs"]

_ZERO = bytes(32)


@dataclass(frozen=True)
class PoStOpenings:
    """n sectors' proofs, C openings each, of a tree of L levels and S = Σ (arity - 1) siblings.
    Field elements are canonical (n, ..., 4) uint64 limbs; roots equal comm_r_last."""

    layout: TreeLayout
    sector_ids: np.ndarray  #: (n,) uint64
    comm_r: np.ndarray  #: (n, 4)
    comm_c: np.ndarray  #: (n, 4)
    comm_r_last: np.ndarray  #: (n, 4)
    leaves: np.ndarray  #: (n, C, 4)
    siblings: np.ndarray  #: (n, C, S, 4), level by level
    positions: np.ndarray  #: (n, C, L) int64, each level's position among its arity

    @property
    def count(self) -> int:
        return int(self.sector_ids.shape[0])

    @property
    def challenges(self) -> int:
        return int(self.leaves.shape[1])

    def leaf_indices(self) -> np.ndarray:
        """(n, C) int64: the challenged leaf of each opening (what its packed path bits equal)."""
        scales = np.cumprod((1, *self.layout.arities[:-1]), dtype=np.int64)
        return self.positions @ scales

    def take(self, rows: np.ndarray | Sequence[int]) -> PoStOpenings:
        """The sectors at `rows` (repeats allowed: a short partition repeats its last sector)."""
        rows = np.asarray(rows, dtype=np.int64)
        return PoStOpenings(self.layout, self.sector_ids[rows], self.comm_r[rows], self.comm_c[rows],
                            self.comm_r_last[rows], self.leaves[rows], self.siblings[rows], self.positions[rows])


@cache
def _template(layout: TreeLayout, challenges: int) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """The bincode of one sector proof with every value zero, and the offsets of its values:
    field elements (in the order comm_r, then per opening its siblings level by level, root, leaf,
    then comm_c, comm_r_last) and positions (per opening, level by level)."""
    from cuzk.filecoin.post import FallbackPoStSectorProof, SectorProof

    levels = [PathElement((_ZERO,) * (arity - 1), 0) for arity in layout.arities]
    b = layout.base_levels
    if layout.kind == "Single":
        proof = MerkleProof(_ZERO, _ZERO, tuple(levels))
    else:
        proof = MerkleProof(_ZERO, _ZERO, tuple(levels[:b]), (levels[b],),
                            (levels[b + 1],) if layout.kind == "Top" else None)
    data = FallbackPoStSectorProof(0, _ZERO, (SectorProof((proof,) * challenges, _ZERO, _ZERO),)).to_bincode()

    # Offsets as write_bincode lays them out (checked against the template's length below).
    def path_offsets(at: int, group: list[int]) -> tuple[int, list[int], list[int]]:
        frs, positions = [], []
        at += 8  # the group's level count
        for arity in group:
            at += 8  # the level's sibling count
            frs.extend(range(at, at + 32 * (arity - 1), 32))
            at += 32 * (arity - 1)
            positions.append(at)
            at += 8
        return at, frs, positions

    arities = list(layout.arities)
    groups = ([arities] if layout.kind == "Single" else
              [arities[:b], arities[b:b + 1]] + ([arities[b + 1:]] if layout.kind == "Top" else []))
    frs, positions = [8], []  # comm_r after the sector id
    at = 8 + 32 + 8 + 8  # sector id, comm_r, the sector count, the opening count
    for _ in range(challenges):
        at += 4  # the proof's kind tag
        ends = at  # where root and leaf sit: first for "Single", after the paths otherwise
        if layout.kind == "Single":
            at += 64
        siblings: list[int] = []
        for group in groups:
            at, f, p = path_offsets(at, group)
            siblings += f
            positions += p
        if layout.kind != "Single":
            ends, at = at, at + 64
        frs += [*siblings, ends, ends + 32]
    frs += [at, at + 32]
    at += 64
    if at != len(data):  # pragma: no cover - the offsets above and write_bincode disagree
        raise AssertionError(f"PoSt sector proof template: {at} bytes laid out, {len(data)} written")
    return data, np.array(frs, dtype=np.int64), np.array(positions, dtype=np.int64), np.frombuffer(data, np.uint8)


def decode_sector_proofs(blobs: Sequence[bytes], layout: TreeLayout, challenges: int) -> PoStOpenings | None:
    """Every blob a one-sector `FallbackPoStSectorProof` of `layout` with `challenges` openings, as
    arrays; None when any blob is not (a size, tag or length differs, a value is not a canonical
    field element, a position exceeds its arity, or an opening's root is not its comm_r_last)."""
    data, fr_at, pos_at, template = _template(layout, challenges)
    n, size = len(blobs), len(data)
    if n == 0 or any(len(blob) != size for blob in blobs):
        return None
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(n, size)
    fr_bytes, pos_bytes = (fr_at[:, None] + np.arange(32)).ravel(), (pos_at[:, None] + np.arange(8)).ravel()
    fixed = np.ones(size, dtype=bool)
    fixed[:8] = False  # the sector id
    fixed[fr_bytes] = False
    fixed[pos_bytes] = False
    # np.take: gathers of columns from a partition's 58 MB ~9x faster than fancy indexing (benchmarks/HISTORY.md)
    fixed_at = np.flatnonzero(fixed)
    if not (np.take(raw, fixed_at, axis=1) == template[fixed_at]).all():
        return None
    frs = np.take(raw, fr_bytes, axis=1).view("<u8").reshape(n, -1, 4)
    if check_canonical(frs.reshape(-1, 4)) >= 0:
        return None
    positions = np.take(raw, pos_bytes, axis=1).view("<u8")
    levels = len(layout.arities)
    positions = positions.reshape(n, challenges, levels)
    if (positions >= np.array(layout.arities, dtype=np.uint64)).any():
        return None
    siblings = sum(a - 1 for a in layout.arities)
    per_opening = frs[:, 1:-2].reshape(n, challenges, siblings + 2, 4)
    comm_r_last = frs[:, -1]
    roots = per_opening[:, :, siblings]
    if not (roots == comm_r_last[:, None]).all():
        return None
    ids = np.ascontiguousarray(raw[:, :8]).view("<u8").reshape(n)
    return PoStOpenings(layout, ids.astype(np.uint64), frs[:, 0].copy(), frs[:, -2].copy(), comm_r_last.copy(),
                        per_opening[:, :, siblings + 1].copy(), per_opening[:, :, :siblings].copy(),
                        positions.astype(np.int64))
