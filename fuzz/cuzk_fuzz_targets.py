"""Fuzz targets: every cuzk parser that reads user data, as `target(data: bytes) -> None`.

A target returns when its parser accepted the input and raises `CuzkError` (the only clean refusal:
the CLI prints it and exits 2, the daemon answers INVALID_ARGUMENT) when it refused it. Any other
exception, a crash or a hang is a bug. Used by the atheris harness (fuzz/run_atheris.py), by the
corpus replay in CI (tests/fuzz/test_corpus_replay.py) and by the hypothesis tests (tests/fuzz/).

Targets that cover several parsers pick one with the input's first byte (`selector`), so one corpus
directory per target holds inputs for all of them; seeds (fuzz/make_seeds.py) start with that byte.

| target | parsers |
|---|---|
| c1_json | `SealCommitPhase1Output.from_json` (Filecoin C1 JSON) |
| vanilla_bincode | bincode C1 (`from_bincode`), PoSt `FallbackPoStSectorProof`, Snap `PartitionProof`, all sizes |
| params_vk | `.vk` bytes (`vk_from_bytes`), `.params`/`.vk` file layout (`scan_layout`) and `read_params` |
| proof | 192-byte bellperson proofs (`proofs_from_bytes`), snarkjs vk.json / proof.json / public.json |
| zkey_wtns | snarkjs `.zkey` (`read_zkey`) and circom `.wtns` (`read_wtns`) files |
| config_toml | the daemon configuration file (`load_config`) |
| grpc_request | a `SubmitProofRequest` as the daemon receives it: field checks, provider routing, payload parse |
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cuzk.errors import CuzkError

Target = Callable[[bytes], None]
_SCRATCH: Path | None = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def scratch_file(name: str, data: bytes) -> Path:
    """Write `data` to a per-process scratch file (for parsers that read paths) and return its path.

    libFuzzer ends its process without running atexit handlers, so directories of processes that are
    gone are removed when the next one starts."""
    global _SCRATCH
    if _SCRATCH is None:
        shm = os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
        root = Path("/dev/shm" if shm else tempfile.gettempdir()) / f"cuzk-fuzz-{os.getuid()}"
        root.mkdir(mode=0o700, exist_ok=True)
        for stale in root.iterdir():
            if stale.name.isdigit() and not _alive(int(stale.name)):
                shutil.rmtree(stale, ignore_errors=True)
        _SCRATCH = root / str(os.getpid())
        _SCRATCH.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, _SCRATCH, True)
    path = _SCRATCH / name
    path.write_bytes(data)
    return path


def selector(data: bytes, choices: int) -> tuple[int, bytes]:
    """The sub-parser the first byte picks, and the rest of the input."""
    if not data:
        return 0, b""
    return data[0] % choices, data[1:]


def c1_json(data: bytes) -> None:
    from cuzk.filecoin.c1 import SealCommitPhase1Output

    SealCommitPhase1Output.from_json(data)


def vanilla_bincode(data: bytes) -> None:
    """Byte 0: parser (0 C1, 1 PoSt sector proof, 2 SnapDeals partition proof) + 3 × sector size index."""
    from cuzk.filecoin.c1 import SealCommitPhase1Output
    from cuzk.filecoin.post import FallbackPoStSectorProof
    from cuzk.filecoin.sizes import ALL_SIZES, SEAL_PROOFS
    from cuzk.filecoin.snap import PartitionProof

    pick, body = selector(data, 3 * len(ALL_SIZES))
    parser, size = pick % 3, ALL_SIZES[pick // 3]
    if parser == 0:
        proof = next(p for p in SEAL_PROOFS if p.size is size and p.feature is None and not p.is_legacy)
        SealCommitPhase1Output.from_bincode(body, proof)
    elif parser == 1:
        FallbackPoStSectorProof.from_bincode(body, size)
    else:
        PartitionProof.from_bincode(body, size)


def params_vk(data: bytes) -> None:
    """Byte 0: 0 vk bytes, 1 layout scan of a .params/.vk file, 2 read_params."""
    from cuzk.groth16.formats.params_file import read_params, scan_layout, vk_from_bytes

    pick, body = selector(data, 3)
    if pick == 0:
        vk_from_bytes(body)
    elif pick == 1:
        scan_layout(scratch_file("fuzz.params", body))
    else:
        read_params(scratch_file("fuzz.params", body))


def proof(data: bytes) -> None:
    """Byte 0: 0 bellperson proof bytes, 1 snarkjs vk.json, 2 proof.json, 3 public.json."""
    from cuzk.cli.groth16_cmd import _read_json  # the CLI's reader of snarkjs files
    from cuzk.groth16.formats import snarkjs_json
    from cuzk.groth16.proof import proofs_from_bytes

    pick, body = selector(data, 4)
    if pick == 0:
        proofs_from_bytes(body)
        return
    value = _read_json(scratch_file("fuzz.json", body))
    if pick == 1:
        snarkjs_json.vk_from_json(value)
    elif pick == 2:
        snarkjs_json.proof_from_json(value)
    else:
        snarkjs_json.public_from_json(value)


def zkey_wtns(data: bytes) -> None:
    """Byte 0: 0 .zkey, 1 .wtns."""
    from cuzk.groth16.formats.wtns import read_wtns
    from cuzk.groth16.formats.zkey import read_zkey

    pick, body = selector(data, 2)
    if pick == 0:
        read_zkey(scratch_file("fuzz.zkey", body))
    else:
        read_wtns(scratch_file("fuzz.wtns", body))


def config_toml(data: bytes) -> None:
    from cuzk.config import load_config

    load_config(scratch_file("fuzz.toml", data))


_REGISTRY = None


def grpc_request(data: bytes) -> None:
    """What the daemon does with a SubmitProofRequest before any memory is reserved, then the full parse.

    Bytes that are not a protobuf message never reach cuzk (gRPC refuses them while deserializing),
    so they count as refused."""
    global _REGISTRY
    from google.protobuf.message import DecodeError

    from cuzk.engine.engine import validate_request
    from cuzk.providers import build_providers
    from cuzk.providers.fields import fields_of
    from cuzk.server._gen import proving_pb2 as pb
    from cuzk.server.grpc_service import request_from_proto

    try:
        message = pb.SubmitProofRequest.FromString(data)
    except DecodeError:
        return
    if _REGISTRY is None:
        _REGISTRY = build_providers(scratch_file("keep", b"").parent.as_posix(), test_circuits=True)
    request = request_from_proto(message, _REGISTRY)
    validate_request(request)
    provider = _REGISTRY.for_request(request)
    provider.circuit_id(request)
    compound = getattr(provider, "compound", None)
    if compound is not None:  # a Filecoin kind: parse the whole payload as planning would
        compound(fields_of(request))


TARGETS: dict[str, Target] = {
    "c1_json": c1_json,
    "vanilla_bincode": vanilla_bincode,
    "params_vk": params_vk,
    "proof": proof,
    "zkey_wtns": zkey_wtns,
    "config_toml": config_toml,
    "grpc_request": grpc_request,
}


def run_clean(name: str, data: bytes) -> bool:
    """Run a target; True if it accepted the input, False if it refused it cleanly (CuzkError).
    Anything else propagates: that is the bug a fuzzer looks for."""
    try:
        TARGETS[name](data)
    except CuzkError:
        return False
    return True
