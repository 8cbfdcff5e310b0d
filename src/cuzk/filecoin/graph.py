"""The SDR graph: 6 DRG parents (ChaCha8 bucket sampling) + 8 expander parents (Feistel PRP) per node.

docs/circuits.md §5, §13. Everything is vectorised over arrays of nodes:

* DRG parents need one ChaCha8 RNG per node (seed = drg_seed ‖ node); the 20 output words every node
  consumes come from two ChaCha blocks, computed for all requested nodes at once (`chacha.py`).
* The Feistel round function F(R, key) = BLAKE2b(R ‖ key)[0..8] & mask only ever sees R below
  2^half_bits (2^11 for 8MiB, 2^17 for 32/64GiB), so it is tabulated once per key with hashlib and the
  three rounds become numpy table look-ups; cycle walking repeats them for the out-of-range lanes.

Parents of 2^18 nodes (8MiB) take well under a second this way; single nodes of a 32GiB graph cost
a table build (~0.5 s, cached) plus microseconds.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path

import numpy as np

from cuzk.errors import FormatError
from cuzk.filecoin.chacha import rand_chacha_words
from cuzk.filecoin.sizes import DRG_DEGREE, EXPANSION_DEGREE, PARAMETER_VERSION, ApiVersion

__all__ = ["PARENT_BYTES", "SdrGraph", "read_parent_cache"]

DEGREE = DRG_DEGREE + EXPANSION_DEGREE
#: bytes per node in a parent cache file: 14 parents as u32 LE
PARENT_BYTES = 4 * DEGREE
FEISTEL_ROUNDS = 3
_DRG_DRAWS = DRG_DEGREE - 1  # m' = 5 sampled parents, 2 u64 draws each


class SdrGraph:
    """The stacked DRG of one sector size and porep_id.

    `api_version` V1_0_0 puts the predecessor last and truncates Feistel outputs to u32; later
    versions put it first (docs/circuits.md §3).
    """

    def __init__(self, nodes: int, porep_id: bytes, api_version: ApiVersion = ApiVersion.V1_1_0) -> None:
        if nodes < 2 or nodes & (nodes - 1):
            raise ValueError(f"SDR graph size must be a power of two >= 2, got {nodes}")
        if len(porep_id) != 32:
            raise ValueError(f"porep_id must be 32 bytes, got {len(porep_id)}")
        self.nodes = nodes
        self.porep_id = bytes(porep_id)
        self.api_version = api_version
        self.drg_seed = hashlib.sha256(b"Filecoin_DRSample" + self.porep_id).digest()[:28]
        raw = hashlib.sha256(b"Filecoin_Feistel" + self.porep_id).digest()
        self.feistel_keys = tuple(int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(4))
        domain = EXPANSION_DEGREE * nodes
        log4, pow4 = 1, 4
        while pow4 < domain:
            pow4 *= 4
            log4 += 1
        self.half_bits = log4
        self.right_mask = (1 << log4) - 1
        self.left_mask = self.right_mask << log4
        self._seed_words = np.frombuffer(self.drg_seed, dtype="<u4").astype(np.uint32)

    # -- identifiers --------------------------------------------------------------------------------

    @property
    def identifier(self) -> str:
        """StackedGraph::identifier(), part of the parameter and parent-cache identifiers."""
        return (f"stacked_graph::StackedGraph{{expansion_degree: {EXPANSION_DEGREE} base_graph: "
                f"drgraph::BucketGraph{{size: {self.nodes}; degree: {DRG_DEGREE}; hasher: poseidon_hasher}} }}")

    @property
    def cache_id(self) -> str:
        """Hex SHA-256 naming the parent cache (cache.rs `cache_path`)."""
        h = hashlib.sha256(b"poseidon_hasher" + self.identifier.encode())
        for key in self.feistel_keys:
            h.update(key.to_bytes(8, "little"))
        h.update(self.nodes.to_bytes(4, "little"))
        return h.hexdigest()

    @property
    def cache_file_name(self) -> str:
        return f"v{PARAMETER_VERSION}-sdr-parent-{self.cache_id}.cache"

    # -- DRG parents ---------------------------------------------------------------------------------

    def drg_parents(self, nodes: np.ndarray | int) -> np.ndarray:
        """(n, 6) int64 DRG parents of `nodes`, in this api version's order."""
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        self._check_nodes(v)
        out = np.zeros((v.size, DRG_DEGREE), dtype=np.int64)
        big = v >= 2
        if not big.any():
            return out
        vb = v[big].astype(np.uint64)
        keys = np.empty((vb.size, 8), dtype=np.uint32)
        keys[:, :7] = self._seed_words
        keys[:, 7] = vb.astype(np.uint32)
        words = rand_chacha_words(keys, 4 * _DRG_DRAWS, rounds=8).astype(np.uint64)
        draws = words[:, 0::2] | (words[:, 1::2] << np.uint64(32))
        meta = vb * np.uint64(_DRG_DRAWS)
        # ceil(log2(meta)) = bit length of meta - 1, exact in float64 for meta < 2^53
        _, exp = np.frexp((meta - np.uint64(1)).astype(np.float64))
        n_buckets = exp.astype(np.uint64)
        sampled = np.empty((vb.size, _DRG_DRAWS), dtype=np.int64)
        for j in range(_DRG_DRAWS):
            bucket = draws[:, 2 * j] % n_buckets + np.uint64(1)
            largest = np.minimum(meta, np.uint64(1) << bucket)
            smallest = np.maximum(np.uint64(2), largest >> np.uint64(1))
            distance = smallest + draws[:, 2 * j + 1] % (largest - smallest + np.uint64(1))
            mapped = ((meta - distance) // np.uint64(_DRG_DRAWS)).astype(np.int64)
            vi = vb.astype(np.int64)
            sampled[:, j] = np.where(mapped == vi, vi - 1, mapped)
        rows = np.empty((vb.size, DRG_DEGREE), dtype=np.int64)
        if self.api_version is ApiVersion.V1_0_0:
            rows[:, :_DRG_DRAWS] = sampled
            rows[:, _DRG_DRAWS] = vb.astype(np.int64) - 1
        else:
            rows[:, 0] = vb.astype(np.int64) - 1
            rows[:, 1:] = sampled
        out[big] = rows
        return out

    # -- expander parents ----------------------------------------------------------------------------

    @cached_property
    def _feistel_tables(self) -> np.ndarray:
        """F(R, key_i) for every R < 2^half_bits and the 3 round keys: (3, 2^half_bits) uint64."""
        size = 1 << self.half_bits
        tables = np.empty((FEISTEL_ROUNDS, size), dtype=np.uint64)
        blake = hashlib.blake2b
        for i, key in enumerate(self.feistel_keys[:FEISTEL_ROUNDS]):
            kb = key.to_bytes(8, "big")
            digests = b"".join(blake(r.to_bytes(8, "big") + kb).digest()[:8] for r in range(size))
            tables[i] = np.frombuffer(digests, dtype=">u8").astype(np.uint64) & np.uint64(self.right_mask)
        return tables

    def _encode(self, x: np.ndarray) -> np.ndarray:
        k = np.uint64(self.half_bits)
        left = (x & np.uint64(self.left_mask)) >> k
        right = x & np.uint64(self.right_mask)
        for table in self._feistel_tables:
            left, right = right, left ^ table[right]
        return (left << k) | right

    def feistel_permute(self, x: np.ndarray) -> np.ndarray:
        """The PRP on [0, 8N): encode, re-applied (cycle walking) while the result is out of range."""
        domain = np.uint64(EXPANSION_DEGREE * self.nodes)
        u = self._encode(np.asarray(x, dtype=np.uint64))
        todo = np.nonzero(u >= domain)[0]
        while todo.size:
            u[todo] = self._encode(u[todo])
            todo = todo[u[todo] >= domain]
        return u

    def exp_parents(self, nodes: np.ndarray | int) -> np.ndarray:
        """(n, 8) int64 expander parents: permute(8v + i) / 8."""
        v = np.atleast_1d(np.asarray(nodes, dtype=np.int64))
        self._check_nodes(v)
        x = (v.astype(np.uint64)[:, None] * np.uint64(EXPANSION_DEGREE)
             + np.arange(EXPANSION_DEGREE, dtype=np.uint64)[None, :])
        t = self.feistel_permute(x.reshape(-1)).reshape(x.shape)
        if self.api_version is ApiVersion.V1_0_0:
            t = t & np.uint64(0xFFFFFFFF)
        return (t // np.uint64(EXPANSION_DEGREE)).astype(np.int64)

    # -- all parents -----------------------------------------------------------------------------------

    def parents_array(self, nodes: np.ndarray | int) -> np.ndarray:
        """(n, 14) int64: [6 DRG parents ‖ 8 expander parents] per node."""
        return np.concatenate([self.drg_parents(nodes), self.exp_parents(nodes)], axis=1)

    def parents(self, node: int) -> list[int]:
        """The 14 parents of one node, as Python ints."""
        return [int(p) for p in self.parents_array(node)[0]]

    def all_parents(self, chunk: int = 1 << 16) -> np.ndarray:
        """(N, 14) uint32 parents of every node (the parent cache contents). Memory: 56 bytes/node."""
        if self.nodes > 1 << 26:
            raise ValueError(f"refusing to materialise parents of {self.nodes} nodes (56 bytes each)")
        out = np.empty((self.nodes, DEGREE), dtype=np.uint32)
        for start in range(0, self.nodes, chunk):
            stop = min(start + chunk, self.nodes)
            out[start:stop] = self.parents_array(np.arange(start, stop))
        return out

    def parent_cache_bytes(self) -> bytes:
        return self.all_parents().astype("<u4").tobytes()

    def write_parent_cache(self, directory: Path) -> Path:
        """Write `v28-sdr-parent-<id>.cache` into `directory`; returns its path."""
        path = Path(directory) / self.cache_file_name
        path.write_bytes(self.parent_cache_bytes())
        return path

    def _check_nodes(self, v: np.ndarray) -> None:
        if v.size and (v.min() < 0 or v.max() >= self.nodes):
            bad = int(v[(v < 0) | (v >= self.nodes)][0])
            raise ValueError(f"node {bad} is outside the graph [0, {self.nodes})")


def read_parent_cache(path: Path, nodes: int | None = None) -> np.ndarray:
    """Read a parent cache file into an (N, 14) uint32 array, checking its size."""
    data = Path(path).read_bytes()
    if len(data) % PARENT_BYTES:
        raise FormatError(f"length {len(data)} is not a multiple of {PARENT_BYTES} bytes (14 u32 parents per node)",
                          source=str(path), offset=len(data) - len(data) % PARENT_BYTES)
    n = len(data) // PARENT_BYTES
    if nodes is not None and n != nodes:
        raise FormatError(f"holds {n} nodes, expected {nodes}", source=str(path))
    arr = np.frombuffer(data, dtype="<u4").reshape(n, DEGREE).astype(np.uint32)
    if n and int(arr.max()) >= n:
        row = int(np.nonzero(arr.max(axis=1) >= n)[0][0])
        raise FormatError(f"node {row} has a parent >= {n}", source=str(path), offset=row * PARENT_BYTES)
    return arr
