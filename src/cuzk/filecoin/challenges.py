"""replica_id and every challenge derivation of PoRep, PoSt and SnapDeals (docs/circuits.md §5, §9, §10).

All functions are pure and take/return plain values (32-byte strings, ints) so that provers,
verifiers, the CLI and tests share one definition.
"""

from __future__ import annotations

import hashlib

from cuzk.filecoin.chacha import chacha20_ietf_keystream
from cuzk.filecoin.sha256 import sha256_fr32
from cuzk.filecoin.sizes import ApiVersion, RegisteredPoStProof, RegisteredSealProof, SectorParams
from cuzk.hashes.poseidon import hash_custom_gr

__all__ = [
    "NI_TAG",
    "interactive_challenges",
    "ni_challenges",
    "porep_challenges",
    "post_challenge_index",
    "post_leaf_challenge",
    "post_sector_challenges",
    "replica_id",
    "snap_challenges",
    "synthetic_challenge",
    "synthetic_challenge_count",
    "synthetic_challenges",
    "synthetic_indexes",
    "winning_sector_challenge",
]

NI_TAG = b"filecoin.io|PoRep|1|NonInteractive|1"
_SYNTH_GEN_KEY = b"filecoin.io|PoRep|1|Synthetic|1|Generation"
_SYNTH_SEL_KEY = b"filecoin.io|PoRep|1|Synthetic|1|Selection"
_SYNTH_NONCE = b"synth-porep\x00"
_SYNTH_DEFAULT_COUNT = 1 << 18


def replica_id(prover_id: bytes, sector_id: int, ticket: bytes, comm_d: bytes, porep_id: bytes) -> bytes:
    """fr32(SHA-256(prover_id ‖ sector_id u64 BE ‖ ticket ‖ comm_d ‖ porep_id))."""
    for name, v in (("prover_id", prover_id), ("ticket", ticket), ("comm_d", comm_d), ("porep_id", porep_id)):
        if len(v) != 32:
            raise ValueError(f"{name} must be 32 bytes, got {len(v)}")
    return sha256_fr32(prover_id + sector_id.to_bytes(8, "big") + ticket + comm_d + porep_id)


def _to_challenge(digest: bytes, nodes: int) -> int:
    """LE integer mod (N - 1) + 1: node 0 is never challenged."""
    return int.from_bytes(digest, "little") % (nodes - 1) + 1


def interactive_challenges(nodes: int, replica: bytes, seed: bytes, k: int, count: int) -> list[int]:
    """Interactive PoRep challenges of partition k: j = count·k + i hashed with replica_id and seed."""
    return [_to_challenge(hashlib.sha256(replica + seed + (count * k + i).to_bytes(4, "little")).digest(), nodes)
            for i in range(count)]


def ni_challenges(nodes: int, replica: bytes, comm_r: bytes, k: int, count: int) -> list[int]:
    """Non-interactive PoRep challenges of partition k (Fiat-Shamir on comm_r)."""
    prefix = NI_TAG + replica + comm_r
    return [_to_challenge(hashlib.sha256(prefix + (count * k + i).to_bytes(4, "little")).digest(), nodes)
            for i in range(count)]


def synthetic_challenge_count(nodes: int) -> int:
    """Size of the synthetic challenge set: min(N, 2^18)."""
    return min(nodes, _SYNTH_DEFAULT_COUNT)


def _blake_key(key: bytes, a: bytes, b: bytes) -> bytes:
    return hashlib.blake2b(a + b, digest_size=32, key=key).digest()


def synthetic_challenge(nodes: int, replica: bytes, comm_r: bytes, index: int) -> int:
    """Synthetic challenge number `index` (0 <= index < min(N, 2^18))."""
    key = _blake_key(_SYNTH_GEN_KEY, replica, comm_r)
    return _to_challenge(chacha20_ietf_keystream(key, _SYNTH_NONCE, 32 * index, 32), nodes)


def synthetic_all(nodes: int, replica: bytes, comm_r: bytes) -> list[int]:
    """The whole synthetic challenge set (what the synthetic prover opens before the seed is known)."""
    count = synthetic_challenge_count(nodes)
    key = _blake_key(_SYNTH_GEN_KEY, replica, comm_r)
    stream = chacha20_ietf_keystream(key, _SYNTH_NONCE, 0, 32 * count)
    return [_to_challenge(stream[32 * i:32 * i + 32], nodes) for i in range(count)]


def synthetic_indexes(nodes: int, replica: bytes, seed: bytes, k: int, count: int) -> list[int]:
    """Which synthetic challenges partition k uses: u32 LE words of the selection stream mod the set size."""
    key = _blake_key(_SYNTH_SEL_KEY, replica, seed)
    stream = chacha20_ietf_keystream(key, _SYNTH_NONCE, 4 * count * k, 4 * count)
    total = synthetic_challenge_count(nodes)
    return [int.from_bytes(stream[4 * i:4 * i + 4], "little") % total for i in range(count)]


def synthetic_challenges(nodes: int, replica: bytes, comm_r: bytes, seed: bytes, k: int, count: int) -> list[int]:
    """Synthetic PoRep challenges of partition k: the selected members of the synthetic set."""
    return [synthetic_challenge(nodes, replica, comm_r, i) for i in synthetic_indexes(nodes, replica, seed, k, count)]


def porep_challenges(proof: RegisteredSealProof, replica: bytes, seed: bytes, comm_r: bytes, k: int) -> list[int]:
    """Challenges of partition k for any seal proof flavour (interactive, synthetic, NI)."""
    nodes, count = proof.size.nodes, proof.challenges_per_partition
    if not 0 <= k < proof.partitions:
        raise ValueError(f"partition {k} out of range for {proof.name} ({proof.partitions} partitions)")
    if proof.non_interactive:
        return ni_challenges(nodes, replica, comm_r, k, count)
    if proof.synthetic:
        return synthetic_challenges(nodes, replica, comm_r, seed, k, count)
    return interactive_challenges(nodes, replica, seed, k, count)


# -- PoSt (docs/circuits.md §9) ----------------------------------------------------------------------------

def post_challenge_index(api_version: ApiVersion, sector_index: int, challenges_per_sector: int, n: int) -> int:
    """V1_0_0/V1_1_0: sector_index·count + n; V1_2_0 (the grindability fix): n."""
    if api_version is ApiVersion.V1_2_0:
        return n
    return sector_index * challenges_per_sector + n


def post_leaf_challenge(sector_bytes: int, randomness: bytes, sector_id: int, challenge_index: int) -> int:
    """u64 LE of SHA-256(randomness ‖ sector_id u64 LE ‖ challenge_index u64 LE)[..8] mod nodes."""
    digest = hashlib.sha256(randomness + sector_id.to_bytes(8, "little") + challenge_index.to_bytes(8, "little"))
    return int.from_bytes(digest.digest()[:8], "little") % (sector_bytes // 32)


def post_sector_challenges(proof: RegisteredPoStProof, randomness: bytes,
                           sector_ids: list[int]) -> dict[int, list[int]]:
    """Leaf challenges per sector, as filecoin-proofs `generate_fallback_sector_challenges`.

    WindowPoSt sectors are chunked into partitions of `sector_count`; the position of a sector in the
    whole list is its sector_index. WinningPoSt has one sector and 66 challenges, indices 0..65.
    """
    per = proof.sector_count
    out: dict[int, list[int]] = {}
    for position, sector in enumerate(sector_ids):
        k, i = divmod(position, per)
        sector_index = k * per + i
        out[sector] = [post_leaf_challenge(proof.size.sector_bytes, randomness, sector,
                                           post_challenge_index(proof.api_version, sector_index,
                                                                proof.challenge_count, n))
                       for n in range(proof.challenge_count)]
    return out


def winning_sector_challenge(randomness: bytes, prover_id: bytes, n: int, sector_set_len: int) -> int:
    """Which of the eligible sectors WinningPoSt challenge n selects."""
    digest = hashlib.sha256(prover_id + randomness + n.to_bytes(8, "little")).digest()
    return int.from_bytes(digest[:8], "little") % sector_set_len


# -- SnapDeals (docs/circuits.md §10) ----------------------------------------------------------------------

def snap_challenges(size: SectorParams, comm_r_new: bytes, k: int) -> list[int]:
    """SnapDeals challenges of partition k, drawn from Poseidon_GR(comm_r_new, digest index) bits."""
    partitions = size.snap_partitions
    if not 0 <= k < partitions:
        raise ValueError(f"SnapDeals partition {k} out of range ({partitions} partitions)")
    pb = partitions.bit_length() - 1
    rb = size.log2_nodes - pb
    per_digest = 254 // rb
    digests = -(-size.snap_challenges // per_digest)
    comm = int.from_bytes(comm_r_new, "little")
    out: list[int] = []
    j = 0
    while len(out) < size.snap_challenges:
        digest = hash_custom_gr(comm, k * digests + j)
        for q in range(min(per_digest, size.snap_challenges - len(out))):
            out.append(((digest >> (q * rb)) & ((1 << rb) - 1)) | (k << rb))
        j += 1
    return out
