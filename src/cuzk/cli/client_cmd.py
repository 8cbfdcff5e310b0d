"""Client commands for a running daemon: `cuzk prove|status|metrics|preload|evict|cancel`.

Each takes --addr (default $CUZK_ADDR or the daemon's default unix socket) and --json, and the
credentials a protected daemon needs: --token-file FILE (the bearer token, read from a file so that
it never shows in `ps`), --tls-ca, --tls-cert, --tls-key and --tls-server-name (each defaulting to
$CUZK_TOKEN_FILE, $CUZK_TLS_CA, $CUZK_TLS_CERT, $CUZK_TLS_KEY, $CUZK_TLS_SERVER_NAME). An RPC error
prints the status code and the daemon's reason and exits 2; `cuzk prove` exits 1 when the proof
comes back FAILED, CANCELLED or TIMEOUT.

`cuzk prove` inputs, as the Rust cuzk-bench takes them: --c1 FILE (PoRep commit phase-1 output,
sent as vanilla_proof), --vanilla FILE (a JSON array of base64 strings, Go's [][]byte, or a raw
single proof; sent as vanilla_proofs), the numeric fields, and hex for randomness and commitments.
Test circuits (daemons with [debug] test_circuits = true): --kind test --test-circuit mimc-8.

Every `cuzk prove` result names the daemon instance and config fingerprint that produced it, and
`--expect-config FINGERPRINT` refuses to submit to a daemon running any other configuration.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from pathlib import Path
from typing import Any

import grpc

from cuzk.daemon.attribution import (
    DaemonRef,
    add_expect_config_argument,
    changed_during,
    identify_daemon,
    require_config,
)
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import (
    KIND_NAMES,
    PRIORITY_NAMES,
    ClientAuth,
    CuzkClient,
    build_submit,
    default_address,
    payload_for_test_circuit,
    to_dict,
)

STATUS_NAMES = {v: k for k, v in pb.AwaitProofResponse.Status.items()}
TIER_NAMES = {v: k for k, v in pb.SRSStatus.Tier.items()}


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--addr", "-a", default=None,
                        help=f"daemon address, host:port or unix:///path (default: $CUZK_ADDR or {default_address()})")
    parser.add_argument("--json", action="store_true", help="print JSON")
    auth = parser.add_argument_group("credentials (for a daemon with daemon.auth_token_file or TLS)")
    auth.add_argument("--token-file", metavar="FILE",
                      help="file holding the bearer token (default: $CUZK_TOKEN_FILE); never pass a token itself")
    auth.add_argument("--tls-ca", metavar="PEM", help="CA bundle that signed the daemon's certificate (TLS)")
    auth.add_argument("--tls-cert", metavar="PEM", help="client certificate (mutual TLS)")
    auth.add_argument("--tls-key", metavar="PEM", help="client private key (mutual TLS)")
    auth.add_argument("--tls-server-name", metavar="NAME",
                      help="name the daemon's certificate carries, if not the address's host")


def register(sub: argparse._SubParsersAction) -> None:
    prove = sub.add_parser("prove", help="submit a proof to a daemon, wait, write the proof bytes")
    _common(prove)
    prove.add_argument("--kind", "-t", required=True, choices=list(KIND_NAMES), help="proof kind")
    prove.add_argument("--c1", type=Path, help="PoRep commit phase-1 output (vanilla_proof)")
    prove.add_argument("--vanilla", type=Path, help="vanilla proofs: JSON array of base64 strings, or a raw proof")
    prove.add_argument("--registered-proof", type=int, default=0)
    prove.add_argument("--sector-size", type=int, default=0)
    prove.add_argument("--sector-num", type=int, default=0)
    prove.add_argument("--miner-id", type=int, default=0)
    prove.add_argument("--partition", type=int, default=0, help="WindowPoSt partition index")
    prove.add_argument("--randomness", default="", help="PoSt challenge seed, 64 hex digits")
    prove.add_argument("--comm-r-old", default="", help="SnapDeals: 64 hex digits")
    prove.add_argument("--comm-r-new", default="", help="SnapDeals: 64 hex digits")
    prove.add_argument("--comm-d-new", default="", help="SnapDeals: 64 hex digits")
    prove.add_argument("--priority", default="default", choices=list(PRIORITY_NAMES))
    prove.add_argument("--request-id", default="", help="idempotency key (default: the daemon picks one)")
    prove.add_argument("--test-circuit", help="with --kind test: mimc-K or bits-N")
    prove.add_argument("--partitions", type=int, default=1, help="with --kind test")
    prove.add_argument("--seed", type=int, default=0, help="with --kind test")
    prove.add_argument("--out", "-o", type=Path, help="write the proof bytes here")
    prove.add_argument("--timeout", type=float, default=0.0,
                       help="give up waiting after this many seconds (the job keeps running; 0 = wait)")
    add_expect_config_argument(prove)
    prove.set_defaults(handler=cmd_prove)

    status = sub.add_parser("status", help="a daemon's devices, parameters, queues and counters")
    _common(status)
    status.set_defaults(handler=cmd_status)

    metrics = sub.add_parser("metrics", help="a daemon's Prometheus metrics")
    _common(metrics)
    metrics.set_defaults(handler=cmd_metrics)

    preload = sub.add_parser("preload", help="load a circuit's parameters (hot) before proofs arrive")
    _common(preload)
    preload.add_argument("circuit_id", help="e.g. porep-32g, or a test circuit such as mimc-8")
    preload.set_defaults(handler=cmd_preload)

    evict = sub.add_parser("evict", help="drop a circuit's parameters from memory")
    _common(evict)
    evict.add_argument("circuit_id")
    evict.set_defaults(handler=cmd_evict)

    cancel = sub.add_parser("cancel", help="cancel a queued or running job")
    _common(cancel)
    cancel.add_argument("job_id")
    cancel.set_defaults(handler=cmd_cancel)


def client_auth(args: argparse.Namespace) -> ClientAuth:
    return ClientAuth.from_env(token_file=args.token_file, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                               tls_key=args.tls_key, tls_server_name=args.tls_server_name)


def _client(args: argparse.Namespace, timeout: float | None = 30.0) -> CuzkClient:
    return CuzkClient(args.addr, timeout=timeout, auth=client_auth(args))


def _rpc_error(addr: str, err: grpc.RpcError) -> CuzkError:
    code = err.code()
    name = code.name if code is not None else "UNKNOWN"
    return CuzkError(f"{addr}: {name}: {err.details()}")


def hex32(value: str, flag: str) -> bytes:
    """A 32-byte value given as hex on the command line (empty: not given)."""
    if not value:
        return b""
    try:
        raw = bytes.fromhex(value.removeprefix("0x"))
    except ValueError:
        raise CuzkError(f"{flag}: not hex: {value!r}") from None
    if len(raw) != 32:
        raise CuzkError(f"{flag}: needs 32 bytes (64 hex digits), got {len(raw)}")
    return raw


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise CuzkError(f"{flag} {path}: {err.strerror}") from None


def read_vanilla(path: Path) -> list[bytes]:
    """A JSON array of base64 strings (Go [][]byte), else the raw file as one proof."""
    data = _read(path, "--vanilla")
    try:
        items = json.loads(data)
    except (ValueError, RecursionError):  # not JSON (or not ours: over-long numbers, deep nesting)
        return [data]
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        return [data]
    try:
        return [base64.b64decode(x, validate=True) for x in items]
    except binascii.Error as err:
        raise CuzkError(f"--vanilla {path}: an entry is not base64: {err}") from None


def _submit_request(args: argparse.Namespace) -> pb.SubmitProofRequest:
    vanilla_proof = b""
    if args.kind == "test":
        if not args.test_circuit:
            raise CuzkError("--kind test needs --test-circuit (e.g. mimc-8)")
        vanilla_proof = payload_for_test_circuit(args.test_circuit, partitions=args.partitions, seed=args.seed)
    elif args.test_circuit:
        raise CuzkError("--test-circuit is only for --kind test")
    if args.c1 is not None:
        vanilla_proof = _read(args.c1, "--c1")
    vanilla = read_vanilla(args.vanilla) if args.vanilla is not None else []
    return build_submit(
        args.kind, request_id=args.request_id, priority=args.priority, vanilla_proof=vanilla_proof,
        vanilla_proofs=vanilla, registered_proof=args.registered_proof, sector_size=args.sector_size,
        sector_number=args.sector_num, miner_id=args.miner_id, partition_index=args.partition,
        randomness=hex32(args.randomness, "--randomness"), comm_r_old=hex32(args.comm_r_old, "--comm-r-old"),
        comm_r_new=hex32(args.comm_r_new, "--comm-r-new"), comm_d_new=hex32(args.comm_d_new, "--comm-d-new"),
    )


def _identify_after(client: CuzkClient) -> DaemonRef | None:
    try:
        return identify_daemon(client)
    except CuzkError:
        return None


def cmd_prove(args: argparse.Namespace) -> int:
    request = _submit_request(args)
    with _client(args, timeout=None) as client:
        client.timeout = 30.0
        daemon = identify_daemon(client)
        client.timeout = None
        require_config(daemon, args.expect_config)
        try:
            submitted = client.submit(request)
            result = client.await_proof(submitted.job_id, round(args.timeout * 1000))
        except grpc.RpcError as err:
            raise _rpc_error(client.addr, err) from None
        client.timeout = 30.0
        after = _identify_after(client)
    status = STATUS_NAMES.get(result.status, str(result.status))
    restarted = changed_during(daemon, after)
    if args.out is not None and result.proof:
        args.out.write_bytes(result.proof)
    if args.json:
        out = to_dict(result)
        out["proof_hex"] = result.proof.hex()
        out["daemon"] = daemon.as_dict()
        if restarted and after is not None:
            out["daemon_after"] = after.as_dict()
            out["warning"] = restarted
        print(json.dumps(out, indent=2))
    else:
        print(f"status:   {status}")
        print(f"job id:   {result.job_id}")
        print(f"daemon:   {daemon.label()}")
        if result.error_message:
            print(f"error:    {result.error_message}")
        print(f"timings:  total {result.total_ms} ms = queue {result.queue_wait_ms} + srs {result.srs_load_ms} "
              f"+ synthesis {result.synthesis_ms} + device {result.gpu_compute_ms} + verify {result.verify_ms} ms "
              "(synthesis and device are sums over partitions)")
        if result.proof:
            where = f", written to {args.out}" if args.out is not None else ""
            print(f"proof:    {len(result.proof)} bytes ({len(result.proof) // 192} partition proofs){where}")
    if restarted:
        print(f"cuzk: warning: {restarted}", file=sys.stderr)
        if args.expect_config and after is not None:
            require_config(after, args.expect_config)
    return 0 if result.status == pb.AwaitProofResponse.COMPLETED else 1


def _print_status(s: pb.GetStatusResponse) -> None:
    print(f"instance {s.instance_id}: up {s.uptime_seconds} s, {s.total_proofs_completed} completed, "
          f"{s.total_proofs_failed} failed, {s.total_proofs_cancelled} cancelled{' (draining)' if s.draining else ''}")
    print(f"memory: {s.memory_reserved_bytes:,} of {s.memory_budget_bytes:,} bytes reserved; "
          f"processes use {s.process_rss_bytes:,} bytes")
    for g in s.gpus:
        job = f"busy with {g.current_job_id} ({g.current_proof_kind})" if g.current_job_id else "idle"
        print(f"device {g.ordinal} [{g.device_kind}] {g.name}: {g.busy_workers}/{g.workers} workers busy, {job}")
    for e in s.loaded_srs:
        print(f"srs {e.circuit_id}: {TIER_NAMES.get(e.tier, e.tier)}, {e.size_bytes:,} bytes file, "
              f"{e.resident_bytes:,} resident in host memory, {e.ref_count} refs")
    for q in s.queues:
        if q.pending or q.in_progress:
            print(f"queue {q.proof_kind}: {q.pending} pending, {q.in_progress} in progress (planning {q.planning}, "
                  f"synthesizing {q.synthesizing}, proving {q.proving})")


def cmd_status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        try:
            status = client.status()
        except grpc.RpcError as err:
            raise _rpc_error(client.addr, err) from None
    if args.json:
        print(json.dumps(to_dict(status), indent=2))
    else:
        _print_status(status)
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    with _client(args) as client:
        try:
            text = client.metrics()
        except grpc.RpcError as err:
            raise _rpc_error(client.addr, err) from None
    if args.json:
        print(json.dumps({"prometheus_text": text}))
    else:
        sys.stdout.write(text)
    return 0


def _simple(args: argparse.Namespace, call: str, *call_args: Any, **kwargs: Any) -> Any:
    with _client(args) as client:
        try:
            return getattr(client, call)(*call_args, **kwargs)
        except grpc.RpcError as err:
            raise _rpc_error(client.addr, err) from None


def cmd_preload(args: argparse.Namespace) -> int:
    reply = _simple(args, "preload", args.circuit_id, wait_forever=True)
    if args.json:
        print(json.dumps(to_dict(reply)))
    elif reply.already_loaded:
        print(f"{args.circuit_id}: already loaded")
    else:
        print(f"{args.circuit_id}: loaded in {reply.load_time_ms} ms")
    return 0


def cmd_evict(args: argparse.Namespace) -> int:
    reply = _simple(args, "evict", args.circuit_id)
    if args.json:
        print(json.dumps(to_dict(reply)))
    elif reply.was_loaded:
        print(f"{args.circuit_id}: evicted, {reply.freed_bytes:,} bytes freed")
    else:
        print(f"{args.circuit_id}: was not loaded")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    was_running = _simple(args, "cancel", args.job_id)
    if args.json:
        print(json.dumps({"job_id": args.job_id, "was_running": was_running}))
    else:
        print(f"{args.job_id}: cancelled ({'it was running' if was_running else 'it was queued or already finished'})")
    return 0
