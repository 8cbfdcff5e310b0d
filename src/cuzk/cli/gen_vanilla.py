"""`cuzk gen-vanilla porep|winning|wpost|snap`: vanilla proofs of test sectors, ready for C2.

Each run writes into --out: the vanilla proof file(s) in the format the corresponding C2 consumes
(C1 JSON / bincode for PoRep, one bincode FallbackPoStSectorProof per sector for PoSt, one bincode
PartitionProof per partition for SnapDeals) and `public.json` with everything needed to state the
public inputs (commitments, ids, randomness, challenges) plus the parameter file and circuit id.

Dense sectors (2KiB, 8MiB) are really sealed. `--sparse` builds a sparse synthetic sector instead
(any size; required from 512MiB on): all untouched nodes share a default value, so 32GiB/64GiB
proofs are generated in seconds and still verify (see cuzk.filecoin.sparse).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cuzk.errors import CuzkError
from cuzk.filecoin.sizes import RegisteredSealProof, SectorParams

if TYPE_CHECKING:
    from cuzk.filecoin.porep import SealedSector
    from cuzk.filecoin.sparse import SparseSector

_DENSE_LIMIT = 1 << 18  # nodes: 8MiB


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gen-vanilla", help="generate vanilla proofs (C1, PoSt, SnapDeals) of a test sector",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("porep", "winning", "wpost", "snap"), help="which proof")
    p.add_argument("--sector-size", required=True, help="2KiB, 8MiB, 512MiB, 32GiB or 64GiB (or bytes)")
    p.add_argument("--sparse", action="store_true",
                   help="sparse synthetic sector (required above 8MiB; PoRep: interactive proofs only)")
    p.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    p.add_argument("--seed", type=int, default=0, help="drives every value not given explicitly (default 0)")
    p.add_argument("--prover-id", help="32-byte hex (default: actor id 1000 as in Curio's examples)")
    p.add_argument("--sector-id", type=int, default=1, help="sector number (default 1)")
    p.add_argument("--ticket", help="PoRep ticket, 32-byte hex (default: from --seed)")
    p.add_argument("--seed-randomness", help="PoRep interactive seed, 32-byte hex (default: from --seed)")
    p.add_argument("--registered-proof", help="seal proof name or id (porep; default StackedDrg<size>V1_1)")
    p.add_argument("--post-proof", help="PoSt proof name or id (default: Winning V1 / Window V1_2)")
    p.add_argument("--randomness", help="PoSt randomness, 32-byte hex canonical Fr (default: from --seed)")
    p.add_argument("--sectors", type=int, default=1,
                   help="wpost/winning: number of sector ids proven with the test replica (default 1)")
    p.add_argument("--bincode", action="store_true", help="porep: also write the supraseal/Curio bincode C1")
    p.add_argument("--verify", action="store_true", help="run the vanilla verifier on the result")
    p.set_defaults(handler=cmd_gen_vanilla)


def _hex32(value: str | None, name: str) -> bytes | None:
    if value is None:
        return None
    try:
        b = bytes.fromhex(value.removeprefix("0x"))
    except ValueError:
        raise CuzkError(f"--{name}: not a hex string: {value!r}") from None
    if len(b) != 32:
        raise CuzkError(f"--{name}: expected 32 bytes (64 hex digits), got {len(b)}")
    return b


def _default_prover() -> bytes:
    return bytes([0xE8, 0x07]) + bytes(30)  # LEB128(1000)


def _random32(rng: np.random.Generator, fr: bool) -> bytes:
    b = bytearray(rng.integers(0, 256, size=32, dtype=np.uint8).tobytes())
    if fr:
        b[31] &= 0x3F
    return bytes(b)


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n")


def cmd_gen_vanilla(args: argparse.Namespace) -> int:
    from cuzk.filecoin.sizes import sector_params

    size = sector_params(args.sector_size)
    if size.nodes > _DENSE_LIMIT and not args.sparse:
        raise CuzkError(f"{size.name} sectors are too large to seal here; add --sparse for a sparse synthetic sector")
    if args.sectors < 1:
        raise CuzkError("--sectors must be at least 1")
    if args.seed < 0 or args.sector_id < 0:
        raise CuzkError("--seed and --sector-id must be non-negative")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([args.seed, 0xC0FFEE])
    common = {
        "prover_id": _hex32(args.prover_id, "prover-id") or _default_prover(),
        "ticket": _hex32(args.ticket, "ticket") or _random32(rng, fr=False),
        "seed_randomness": _hex32(args.seed_randomness, "seed-randomness") or _random32(rng, fr=False),
    }
    start = time.perf_counter()
    handler = {"porep": _porep, "winning": _post, "wpost": _post, "snap": _snap}[args.kind]
    try:
        written = handler(args, size, common, rng)
    except _VerificationFailedError as failed:
        print(f"cuzk: vanilla verification failed ({len(failed.problems)} problems):", file=sys.stderr)
        for problem in failed.problems[:20]:
            print(f"  {problem}", file=sys.stderr)
        if len(failed.problems) > 20:
            print(f"  ... and {len(failed.problems) - 20} more", file=sys.stderr)
        return 1  # the CLI's "verification failed" status
    elapsed = time.perf_counter() - start
    for path in written:
        print(path)
    print(f"{args.kind} {size.name}{' (sparse)' if args.sparse else ''}: {len(written)} files in {elapsed:.1f} s")
    return 0


def _seal_proof_for(args: argparse.Namespace, size: SectorParams) -> RegisteredSealProof:
    from cuzk.filecoin.sizes import seal_proof

    if args.registered_proof is None:
        return seal_proof(size.index + 5)
    key = int(args.registered_proof) if args.registered_proof.isdigit() else args.registered_proof
    proof = seal_proof(key)
    if proof.size != size:
        raise CuzkError(f"--registered-proof {proof.name} is for {proof.size.name}, not {size.name}")
    return proof


def _sector(args: argparse.Namespace, size: SectorParams, common: dict) -> SealedSector | SparseSector:
    """A sealed test sector (dense or sparse) for PoSt and SnapDeals."""
    from cuzk.filecoin.porep import random_sector_data, seal
    from cuzk.filecoin.sparse import sparse_sector

    proof = _seal_proof_for(args, size)
    if args.sparse:
        return sparse_sector(proof, seed=args.seed, prover_id=common["prover_id"], sector_id=args.sector_id,
                             ticket=common["ticket"], seed_randomness=common["seed_randomness"])
    return seal(proof, random_sector_data(size.nodes, args.seed), common["prover_id"], args.sector_id,
                common["ticket"])


def _porep(args: argparse.Namespace, size: SectorParams, common: dict, rng: np.random.Generator) -> list[Path]:
    from cuzk.filecoin.challenges import porep_challenges
    from cuzk.filecoin.porep import verify_porep_vanilla
    from cuzk.filecoin.sizes import CircuitKind, circuit_id, parameter_file_name
    from cuzk.filecoin.synthetic import generate_c1

    proof = _seal_proof_for(args, size)
    c1 = generate_c1(size, sparse=args.sparse, seed=args.seed, prover_id=common["prover_id"],
                     sector_id=args.sector_id, ticket=common["ticket"], seed_randomness=common["seed_randomness"],
                     registered_proof=proof)
    written = [args.out / "c1.json"]
    written[0].write_text(c1.to_json())
    if args.bincode:
        written.append(args.out / "c1.bin")
        written[1].write_bytes(c1.to_bincode())
    public = {
        "kind": "porep",
        "registered_proof": proof.name,
        "registered_proof_id": proof.id,
        "api_version": proof.api_version.value,
        "feature": proof.feature,
        "porep_id": proof.porep_id.hex(),
        "sector_size": size.sector_bytes,
        "sparse": args.sparse,
        "prover_id": common["prover_id"].hex(),
        "sector_id": args.sector_id,
        "ticket": c1.ticket.hex(),
        "seed": c1.seed.hex(),
        "comm_d": c1.comm_d.hex(),
        "comm_r": c1.comm_r.hex(),
        "replica_id": c1.replica_id.hex(),
        "challenges": [porep_challenges(proof, c1.replica_id, c1.seed, c1.comm_r, k) for k in range(proof.partitions)],
        "circuit_id": circuit_id(CircuitKind.POREP, size),
        "parameter_file": parameter_file_name(CircuitKind.POREP, size),
    }
    if args.verify:
        problems = verify_porep_vanilla(c1, prover_id=common["prover_id"], sector_id=args.sector_id)
        _report(problems)
        public["vanilla_verified"] = True
    written.append(args.out / "public.json")
    _write_json(written[-1], public)
    return written


def _post(args: argparse.Namespace, size: SectorParams, common: dict, rng: np.random.Generator) -> list[Path]:
    from cuzk.filecoin.challenges import post_sector_challenges
    from cuzk.filecoin.post import verify_post_vanilla, window_post_vanilla, winning_post_vanilla
    from cuzk.filecoin.sha256 import check_fr_bytes
    from cuzk.filecoin.sizes import CircuitKind, circuit_id, parameter_file_name, post_proof

    winning = args.kind == "winning"
    if args.post_proof is None:
        proof = post_proof(size.index if winning else size.index + 10)
    else:
        proof = post_proof(int(args.post_proof) if args.post_proof.isdigit() else args.post_proof)
    kind = CircuitKind.WINNING if winning else CircuitKind.WINDOW
    if proof.kind is not kind or proof.size != size:
        raise CuzkError(f"--post-proof {proof.name} is not a {args.kind} proof for {size.name}")
    randomness = _hex32(args.randomness, "randomness") or _random32(rng, fr=True)
    try:
        check_fr_bytes(randomness, field="--randomness")
    except CuzkError as err:
        raise CuzkError(f"{err} (callers clear the top two bits: byte 31 &= 0x3f)") from None
    sector = _sector(args, size, common)
    ids = [args.sector_id + i for i in range(args.sectors)]
    replicas = dict.fromkeys(ids, sector)
    if winning:
        proofs = winning_post_vanilla(proof, replicas, randomness, common["prover_id"])
    else:
        proofs = window_post_vanilla(proof, replicas, randomness)
    written = []
    for p in proofs:
        path = args.out / f"{args.kind}-vanilla-{p.sector_id}.bin"
        path.write_bytes(p.to_bincode())
        written.append(path)
    challenged = [p.sector_id for p in proofs]
    public = {
        "kind": args.kind,
        "registered_proof": proof.name,
        "chain_name": proof.chain_name,
        "registered_proof_id": proof.id,
        "api_version": proof.api_version.value,
        "sector_size": size.sector_bytes,
        "sparse": args.sparse,
        "prover_id": common["prover_id"].hex(),
        "randomness": randomness.hex(),
        "eligible_sectors": ids,
        "challenged_sectors": [{"sector_id": s, "comm_r": sector.comm_r.hex()} for s in challenged],
        "comm_c": sector.comm_c.hex(),
        "comm_r_last": sector.comm_r_last.hex(),
        "challenges": {str(s): c for s, c in post_sector_challenges(proof, randomness, challenged).items()},
        "sectors_per_partition": proof.sector_count,
        "circuit_sector_count": 66 if winning else proof.sector_count,
        "challenges_per_sector": proof.challenge_count,
        "circuit_id": circuit_id(kind, size),
        "parameter_file": parameter_file_name(kind, size),
    }
    if args.verify:
        _report(verify_post_vanilla(proof, randomness, proofs))
        public["vanilla_verified"] = True
    written.append(args.out / "public.json")
    _write_json(written[-1], public)
    return written


def _snap(args: argparse.Namespace, size: SectorParams, common: dict, rng: np.random.Generator) -> list[Path]:
    from cuzk.filecoin.porep import random_sector_data
    from cuzk.filecoin.sizes import CircuitKind, circuit_id, parameter_file_name, update_proof
    from cuzk.filecoin.snap import (
        encode_update,
        encode_update_sparse,
        k_and_h_select,
        partition_proof,
        verify_snap_vanilla,
    )

    sector = _sector(args, size, common)
    if args.sparse:
        positions = rng.choice(size.nodes, size=min(size.nodes, 256), replace=False)
        new_data = {}
        for v in sorted(int(x) for x in positions):
            b = bytearray(rng.integers(0, 256, size=32, dtype=np.uint8).tobytes())
            b[31] &= 0x3F
            new_data[v] = bytes(b)
        update = encode_update_sparse(size, sector, new_data)
    else:
        update = encode_update(size, sector, random_sector_data(size.nodes, args.seed + 1))
    proofs = [partition_proof(update, k) for k in range(size.snap_partitions)]
    written = []
    for k, p in enumerate(proofs):
        path = args.out / f"snap-partition-{k}.bin"
        path.write_bytes(p.to_bincode())
        written.append(path)
    proof = update_proof(size.index)
    public = {
        "kind": "snap",
        "registered_proof": proof.name,
        "registered_proof_id": proof.id,
        "sector_size": size.sector_bytes,
        "sparse": args.sparse,
        "h": update.h,
        "comm_c": update.comm_c.hex(),
        "comm_r_old": update.comm_r_old.hex(),
        "comm_d_new": update.comm_d_new.hex(),
        "comm_r_new": update.comm_r_new.hex(),
        "partitions": size.snap_partitions,
        "k_and_h_select": [k_and_h_select(size, k, update.h) for k in range(size.snap_partitions)],
        "circuit_id": circuit_id(CircuitKind.SNAP, size),
        "parameter_file": parameter_file_name(CircuitKind.SNAP, size),
    }
    if args.verify:
        _report(verify_snap_vanilla(size, update.comm_r_old, update.comm_d_new, update.comm_r_new, proofs, update.h))
        public["vanilla_verified"] = True
    written.append(args.out / "public.json")
    _write_json(written[-1], public)
    return written


class _VerificationFailedError(Exception):
    """--verify found problems in what was just generated (a bug, reported with exit status 1)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problems")
        self.problems = problems


def _report(problems: list[str]) -> None:
    if problems:
        raise _VerificationFailedError(problems)
