"""C1 outputs of test sectors for any published size: `generate_c1`.

Small sectors (2KiB, 8MiB) are sealed densely (`cuzk.filecoin.porep.seal`); 32GiB and 64GiB come from
a sparse synthetic sector (`cuzk.filecoin.sparse`) whose challenged nodes alone are labelled honestly.
Either way the vanilla proofs verify (`cuzk.filecoin.porep.verify_porep_vanilla`). "Synthetic" here
means made-up test data, not the SyntheticPoRep proof kind.
"""

from __future__ import annotations

import numpy as np

from cuzk.errors import CuzkError
from cuzk.filecoin.c1 import SealCommitPhase1Output
from cuzk.filecoin.porep import DENSE_MAX_NODES, SectorView, c1_of, random_sector_data, seal
from cuzk.filecoin.sha256 import FR32_MASK
from cuzk.filecoin.sizes import RegisteredSealProof, SectorParams, seal_proof, sector_params
from cuzk.filecoin.sparse import sparse_sector

__all__ = ["generate_c1"]


def _bytes32(value: bytes | None, rng: np.random.Generator, *, fr: bool) -> bytes:
    if value is None:
        b = bytearray(rng.integers(0, 256, size=32, dtype=np.uint8).tobytes())
        if fr:
            b[31] &= FR32_MASK
        return bytes(b)
    if len(value) != 32:
        raise CuzkError(f"expected 32 bytes, got {len(value)}")
    return bytes(value)


def generate_c1(size: SectorParams | int | str, *, sparse: bool, seed: int = 0, prover_id: bytes | None = None,
                sector_id: int = 1, ticket: bytes | None = None, seed_randomness: bytes | None = None,
                registered_proof: RegisteredSealProof | int | str | None = None,
                data: bytes | None = None) -> SealCommitPhase1Output:
    """A C1 output whose vanilla proofs verify, for any published size.

    `seed` drives every unspecified value (sector data, prover_id, ticket, interactive seed, the sparse
    sector's free labels), so outputs are reproducible. `registered_proof` defaults to the V1_1
    (interactive) proof of the size. `sparse=True` builds a sparse synthetic sector
    (:mod:`cuzk.filecoin.sparse`); it supports the interactive proofs only.
    """
    params = size if isinstance(size, SectorParams) else sector_params(size)
    if registered_proof is None:
        proof = seal_proof(params.index + 5)
    else:
        proof = registered_proof if isinstance(registered_proof, RegisteredSealProof) else seal_proof(registered_proof)
    if proof.size != params:
        raise CuzkError(f"registered proof {proof.name} is for {proof.size.name}, not {params.name}")
    if not sparse and params.nodes > DENSE_MAX_NODES:
        raise CuzkError(f"dense sealing is for test sizes (2KiB, 8MiB); use a sparse sector for {params.name}")
    rng = np.random.default_rng(seed)
    prover = _bytes32(prover_id, rng, fr=True)
    tick = _bytes32(ticket, rng, fr=False)
    interactive_seed = _bytes32(seed_randomness, rng, fr=False)
    if sparse:
        sector: SectorView = sparse_sector(proof, seed=seed, prover_id=prover, sector_id=sector_id, ticket=tick,
                                           seed_randomness=interactive_seed)
    else:
        sector = seal(proof, data if data is not None else random_sector_data(params.nodes, seed), prover, sector_id,
                      tick)
    return c1_of(sector, interactive_seed, tick)
