"""A small typed client for the cuzk.v1 daemon (used by the CLI and the tests).

Addresses: "host:port", "unix:///abs/path" (or "unix:rel"), and for convenience "http://host:port"
(the Rust bench's spelling, docs/compatibility.md §8; the scheme is dropped). The default is the daemon's default listen
address, or $CUZK_ADDR when set. Messages up to 256 MiB travel either way, like Curio's client.

Credentials (`ClientAuth`, docs/security.md): a bearer token read from a file (never given on a
command line, where `ps` would show it), sent as `authorization: Bearer <token>` on every call; and
for TCP, TLS with a CA bundle to check the daemon's certificate plus, for mutual TLS, the client's
certificate and key. Each comes from the constructor, else from $CUZK_TOKEN_FILE, $CUZK_TLS_CA,
$CUZK_TLS_CERT, $CUZK_TLS_KEY and $CUZK_TLS_SERVER_NAME. Unix socket addresses never use TLS.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cuzk.config import DEFAULT_LISTEN
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server._gen import proving_pb2_grpc as pb_grpc

MAX_MESSAGE = 256 << 20
KIND_NAMES = {
    "test": pb.PROOF_KIND_UNSPECIFIED, "porep": pb.POREP_SEAL_COMMIT, "snap": pb.SNAP_DEALS_UPDATE,
    "wpost": pb.WINDOW_POST_PARTITION, "winning": pb.WINNING_POST,
}
PRIORITY_NAMES = {"default": 0, "low": pb.LOW, "normal": pb.NORMAL, "high": pb.HIGH, "critical": pb.CRITICAL}


def default_address() -> str:
    return os.environ.get("CUZK_ADDR") or DEFAULT_LISTEN


def grpc_target(addr: str) -> str:
    """A gRPC channel target for a daemon address."""
    addr = addr.strip()
    for scheme in ("http://", "grpc://", "tcp://"):
        if addr.startswith(scheme):
            addr = addr[len(scheme):]
    if not addr:
        raise CuzkError("empty daemon address")
    return addr


def payload_for_test_circuit(circuit: str, *, partitions: int = 1, seed: int = 0, **extra: Any) -> bytes:
    """The vanilla_proof of a test-circuit request (daemons with [debug] test_circuits = true)."""
    return json.dumps({"test_circuit": circuit, "partitions": partitions, "seed": seed, **extra}).encode()


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise CuzkError(f"{what} {path}: {err.strerror}") from None


@dataclass(frozen=True)
class ClientAuth:
    """How a client proves who it is: file paths only (the secrets are read when a channel opens)."""

    token_file: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    #: The name the daemon's certificate must carry, when the address does not (e.g. 127.0.0.1).
    tls_server_name: str | None = None

    @classmethod
    def from_env(cls, **overrides: str | None) -> ClientAuth:
        env = os.environ
        values = {"token_file": env.get("CUZK_TOKEN_FILE"), "tls_ca": env.get("CUZK_TLS_CA"),
                  "tls_cert": env.get("CUZK_TLS_CERT"), "tls_key": env.get("CUZK_TLS_KEY"),
                  "tls_server_name": env.get("CUZK_TLS_SERVER_NAME")}
        values.update({k: v for k, v in overrides.items() if v})
        return cls(**{k: v or None for k, v in values.items()})

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert)

    def token(self) -> str | None:
        if not self.token_file:
            return None
        token = _read_file(self.token_file, "token file").strip()
        if not token:
            raise CuzkError(f"token file {self.token_file} is empty")
        try:
            return token.decode("ascii")
        except UnicodeDecodeError:
            raise CuzkError(f"token file {self.token_file}: the token must be ASCII") from None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise CuzkError("a client certificate needs its key: give --tls-cert and --tls-key together")
        ca = _read_file(self.tls_ca, "--tls-ca") if self.tls_ca else None
        cert = _read_file(self.tls_cert, "--tls-cert") if self.tls_cert else None
        key = _read_file(self.tls_key, "--tls-key") if self.tls_key else None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every call (works on plaintext channels, unlike call credentials)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _details(self, details: Any) -> Any:
        # grpc hands interceptors its _ClientCallDetails namedtuple
        return details._replace(metadata=[*(details.metadata or ()), self._header])

    def intercept_unary_unary(self, continuation: Callable, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)


def open_channel(addr: str, auth: ClientAuth, options: list[tuple[str, Any]]) -> grpc.Channel:
    """A channel to a daemon address with `auth` applied (TLS only for TCP addresses)."""
    target = grpc_target(addr)
    is_unix = target.startswith("unix:")
    if auth.uses_tls and not is_unix:
        if auth.tls_server_name:
            options = [*options, ("grpc.ssl_target_name_override", auth.tls_server_name)]
        channel = grpc.secure_channel(target, auth.channel_credentials(), options=options)
    else:
        channel = grpc.insecure_channel(target, options=options)
    token = auth.token()
    return grpc.intercept_channel(channel, _BearerToken(token)) if token else channel


def to_dict(message: Any) -> dict[str, Any]:
    """A response as JSON-able dict (all fields, enum names, bytes as base64)."""
    return MessageToDict(message, always_print_fields_with_no_presence=True, preserving_proto_field_name=True)


class CuzkClient:
    """Blocking calls on one channel; every method raises grpc.RpcError on RPC failure."""

    def __init__(self, addr: str | None = None, *, timeout: float | None = 30.0,
                 auth: ClientAuth | None = None) -> None:
        self.addr = addr or default_address()
        self.timeout = timeout
        self.auth = auth if auth is not None else ClientAuth.from_env()
        options = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
        self.channel = open_channel(self.addr, self.auth, options)
        self.stub = pb_grpc.ProvingEngineStub(self.channel)
        self._health = health_pb2_grpc.HealthStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> CuzkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls -----------------------------------------------------------------------------------------
    def submit(self, request: pb.SubmitProofRequest) -> pb.SubmitProofResponse:
        return self.stub.SubmitProof(request, timeout=self.timeout)

    def await_proof(self, job_id: str, timeout_ms: int = 0, *,
                    rpc_timeout: float | None = None) -> pb.AwaitProofResponse:
        return self.stub.AwaitProof(pb.AwaitProofRequest(job_id=job_id, timeout_ms=timeout_ms), timeout=rpc_timeout)

    def prove(self, request: pb.SubmitProofRequest, *, timeout: float | None = None) -> pb.AwaitProofResponse:
        return self.stub.Prove(pb.ProveRequest(submit=request), timeout=timeout).result

    def cancel(self, job_id: str) -> bool:
        return self.stub.CancelProof(pb.CancelProofRequest(job_id=job_id), timeout=self.timeout).was_running

    def status(self) -> pb.GetStatusResponse:
        return self.stub.GetStatus(pb.GetStatusRequest(), timeout=self.timeout)

    def metrics(self) -> str:
        return self.stub.GetMetrics(pb.GetMetricsRequest(), timeout=self.timeout).prometheus_text

    def preload(self, circuit_id: str, *, wait_forever: bool = False) -> pb.PreloadSrsResponse:
        """Loading real parameters can take minutes: the CLI waits as long as it takes."""
        return self.stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id=circuit_id),
                                    timeout=None if wait_forever else self.timeout)

    def evict(self, circuit_id: str) -> pb.EvictSrsResponse:
        return self.stub.EvictSRS(pb.EvictSrsRequest(circuit_id=circuit_id), timeout=self.timeout)

    def info(self) -> pb.GetDaemonInfoResponse:
        return self.stub.GetDaemonInfo(pb.GetDaemonInfoRequest(), timeout=self.timeout)

    def serving(self) -> bool:
        """grpc.health.v1: is the daemon SERVING (ready, not draining, and some device can prove)?"""
        reply = self._health.Check(health_pb2.HealthCheckRequest(service="cuzk.v1.ProvingEngine"),
                                   timeout=self.timeout)
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def wait_ready(self, timeout: float, *, alive: Any = None) -> None:
        """Poll health until SERVING; `alive()` (optional) says whether to keep waiting."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if alive is not None and not alive():
                raise CuzkError(f"the daemon at {self.addr} exited before it was ready")
            try:
                if self.serving():
                    return
            except grpc.RpcError as err:
                last = err
            time.sleep(0.1)
        raise CuzkError(f"the daemon at {self.addr} was not ready within {timeout:.0f} s ({last})")


def build_submit(kind: str, *, request_id: str = "", priority: str = "default", vanilla_proof: bytes = b"",
                 vanilla_proofs: Sequence[bytes] = (), registered_proof: int = 0, sector_size: int = 0,
                 sector_number: int = 0, miner_id: int = 0, randomness: bytes = b"", partition_index: int = 0,
                 comm_r_old: bytes = b"", comm_r_new: bytes = b"", comm_d_new: bytes = b"") -> pb.SubmitProofRequest:
    if kind not in KIND_NAMES:
        raise CuzkError(f"unknown proof kind {kind!r} (one of {', '.join(KIND_NAMES)})")
    if priority not in PRIORITY_NAMES:
        raise CuzkError(f"unknown priority {priority!r} (one of {', '.join(PRIORITY_NAMES)})")
    return pb.SubmitProofRequest(
        request_id=request_id, proof_kind=KIND_NAMES[kind], priority=PRIORITY_NAMES[priority],
        vanilla_proof=vanilla_proof, vanilla_proofs=list(vanilla_proofs), registered_proof=registered_proof,
        sector_size=sector_size, sector_number=sector_number, miner_id=miner_id, randomness=randomness,
        partition_index=partition_index, comm_r_old=comm_r_old, comm_r_new=comm_r_new, comm_d_new=comm_d_new,
    )
