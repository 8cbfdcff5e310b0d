"""What a benchmark proves: a proof kind with its inputs, as a daemon request or an engine request.

Kinds are the Rust bench's names and aliases (porep, snap, wpost, winning, porep-c2, seal-commit,
snap-deals, update, window-post, windowpost, winning-post, winningpost), `test` with a test
circuit, or a test circuit id itself (`mimc-8`, `bits-2`: daemons with [debug] test_circuits).

`from_gen_vanilla(dir)` reads what `cuzk gen-vanilla` wrote (public.json plus the C1 or vanilla
proof files) so a benchmark can run on generated inputs without copying ids by hand.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError

KIND_ALIASES = {
    "porep": "porep", "porep-c2": "porep", "seal-commit": "porep",
    "snap": "snap", "snap-deals": "snap", "update": "snap",
    "wpost": "wpost", "window-post": "wpost", "windowpost": "wpost",
    "winning": "winning", "winning-post": "winning", "winningpost": "winning",
    "test": "test",
}
_TEST_CIRCUIT = re.compile(r"^(mimc-\d+|bits-\d+)$")
#: The Rust daemon's default priority per kind, named as `cuzk prove --priority` takes them.
DEFAULT_PRIORITY = {"winning": "critical", "wpost": "high", "porep": "normal", "snap": "normal", "test": "normal"}


def resolve_kind(name: str) -> tuple[str, str | None]:
    """(kind, test circuit or None) for a -t value."""
    key = name.strip().lower()
    if key in KIND_ALIASES:
        return KIND_ALIASES[key], None
    if _TEST_CIRCUIT.match(key):
        return "test", key
    raise CuzkError(f"-t {name!r}: not a proof kind ({', '.join(sorted(KIND_ALIASES))}) or a test circuit "
                    "(mimc-K, bits-N)")


@dataclass(frozen=True)
class ProofInputs:
    kind: str
    test_circuit: str | None = None
    partitions: int = 1
    seed: int = 0
    synth_delay_ms: int = 0
    c1: bytes = b""
    vanilla: tuple[bytes, ...] = ()
    registered_proof: int = 0
    sector_size: int = 0
    sector_number: int = 0
    miner_id: int = 0
    partition_index: int = 0
    randomness: bytes = b""
    comm_r_old: bytes = b""
    comm_r_new: bytes = b""
    comm_d_new: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse combinations that can only fail, before anything is submitted."""
        if self.kind == "test":
            if not self.test_circuit:
                raise CuzkError("-t test needs a test circuit: use -t mimc-8 (or --test-circuit)")
            if self.partitions < 1:
                raise CuzkError(f"--partitions must be at least 1, got {self.partitions}")
            return
        if self.kind == "porep" and not self.c1:
            raise CuzkError("-t porep needs --c1 FILE (commit phase-1 output) or --inputs DIR from gen-vanilla")
        if self.kind in ("snap", "wpost", "winning") and not self.vanilla:
            raise CuzkError(f"-t {self.kind} needs --vanilla FILE or --inputs DIR from gen-vanilla")
        for name in ("comm_r_old", "comm_r_new", "comm_d_new", "randomness"):
            value = getattr(self, name)
            if value and len(value) != 32:
                raise CuzkError(f"--{name.replace('_', '-')}: needs 32 bytes, got {len(value)}")

    @property
    def label(self) -> str:
        if self.kind == "test":
            return f"{self.test_circuit}x{self.partitions}"
        return self.kind

    def test_payload(self) -> bytes:
        body: dict[str, Any] = {"test_circuit": self.test_circuit, "partitions": self.partitions, "seed": self.seed}
        if self.synth_delay_ms:
            body["synth_delay_ms"] = self.synth_delay_ms
        body.update(self.extra)
        return json.dumps(body).encode()

    def submit_request(self, *, priority: str = "default", request_id: str = "") -> Any:
        """A cuzk.v1 SubmitProofRequest."""
        from cuzk.server.client import build_submit

        return build_submit(
            self.kind, request_id=request_id, priority=priority,
            vanilla_proof=self.test_payload() if self.kind == "test" else self.c1, vanilla_proofs=self.vanilla,
            registered_proof=self.registered_proof, sector_size=self.sector_size, sector_number=self.sector_number,
            miner_id=self.miner_id, randomness=self.randomness, partition_index=self.partition_index,
            comm_r_old=self.comm_r_old, comm_r_new=self.comm_r_new, comm_d_new=self.comm_d_new)

    def engine_request(self, *, request_id: str, priority: str = "default") -> Any:
        """The engine's ProofRequest (for in-process runs)."""
        from cuzk.engine.jobs import Priority, ProofKind
        from cuzk.providers.fields import submit_request

        kind = {"test": ProofKind.TEST, "porep": ProofKind.POREP_SEAL_COMMIT, "snap": ProofKind.SNAP_DEALS_UPDATE,
                "wpost": ProofKind.WINDOW_POST_PARTITION, "winning": ProofKind.WINNING_POST}[self.kind]
        return submit_request(
            request_id, kind, None if priority == "default" else Priority[priority.upper()],
            sector_size=self.sector_size, registered_proof=self.registered_proof,
            vanilla_proof=self.test_payload() if self.kind == "test" else self.c1, vanilla_proofs=list(self.vanilla),
            sector_number=self.sector_number, miner_id=self.miner_id, randomness=self.randomness,
            partition_index=self.partition_index, comm_r_old=self.comm_r_old, comm_r_new=self.comm_r_new,
            comm_d_new=self.comm_d_new)


def _miner_from_prover_id(prover_id_hex: str) -> int:
    """Actor id from a prover_id (unsigned LEB128, zero padded), as gen-vanilla writes it."""
    value, shift = 0, 0
    for byte in bytes.fromhex(prover_id_hex):
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value
    raise CuzkError(f"prover_id {prover_id_hex} is not an LEB128 actor id")


def _bytes32(public: dict[str, Any], key: str) -> bytes:
    return bytes.fromhex(public[key]) if public.get(key) else b""


def from_gen_vanilla(directory: Path, base: ProofInputs) -> ProofInputs:
    """`base` with the inputs `cuzk gen-vanilla` wrote into `directory` (its kind must match)."""
    public_path = directory / "public.json"
    try:
        public = json.loads(public_path.read_text())
    except FileNotFoundError:
        raise CuzkError(f"--inputs {directory}: no public.json (write it with `cuzk gen-vanilla`)") from None
    except (OSError, json.JSONDecodeError) as err:
        raise CuzkError(f"--inputs {public_path}: {err}") from None
    kind = public.get("kind")
    if kind != base.kind:
        raise CuzkError(f"--inputs {directory}: holds {kind} inputs, but -t asks for {base.kind}")
    common = {"registered_proof": int(public["registered_proof_id"]), "sector_size": int(public["sector_size"])}
    if "prover_id" in public:
        common["miner_id"] = _miner_from_prover_id(public["prover_id"])
    if kind == "porep":
        return replace(base, c1=(directory / "c1.json").read_bytes(), sector_number=int(public["sector_id"]),
                       **common)
    if kind in ("winning", "wpost"):
        files = sorted(directory.glob(f"{kind}-vanilla-*.bin"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        sectors = [int(p.stem.rsplit("-", 1)[1]) for p in files]
        return replace(base, vanilla=tuple(p.read_bytes() for p in files), randomness=_bytes32(public, "randomness"),
                       sector_number=sectors[0] if sectors else 0, **common)
    files = sorted(directory.glob("snap-partition-*.bin"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    return replace(base, vanilla=tuple(p.read_bytes() for p in files), comm_r_old=_bytes32(public, "comm_r_old"),
                   comm_r_new=_bytes32(public, "comm_r_new"), comm_d_new=_bytes32(public, "comm_d_new"), **common)
