"""The cuzk.v1.ProvingEngine gRPC service over the engine.

Engine errors map to status codes: a request that can never succeed is INVALID_ARGUMENT (with the
reason), an unknown job NOT_FOUND, a request_id reused for different inputs ALREADY_EXISTS, an
eviction of parameters in use FAILED_PRECONDITION, memory that can never suffice
RESOURCE_EXHAUSTED, a draining daemon or a state directory that cannot be written (the job journal)
UNAVAILABLE. A proof that fails is not an RPC error: the
response says FAILED with the message (docs/compatibility.md §1).

Prove waits for the result; if the client goes away first (deadline, cancel, disconnect) the job
finishes or is cancelled according to `daemon.on_prove_disconnect`.

While the daemon starts (listeners bound, engine not yet up) only GetDaemonInfo is answered, with
ready = false, so whoever probes the address learns that a cuzk daemon holds it and which one; every
other RPC is UNAVAILABLE until the daemon is ready.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from cuzk.engine.engine import Engine, NotAcceptingError, QueueFullError, RequestConflictError, UnknownJobError
from cuzk.engine.jobs import JobResult, Priority, ProofKind, ProofRequest
from cuzk.engine.journal import JournalUnavailableError
from cuzk.engine.memory import BudgetError
from cuzk.engine.providers import InvalidRequestError, ProviderRegistry
from cuzk.engine.srs import SrsInUseError
from cuzk.errors import CuzkError
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server._gen import proving_pb2_grpc as pb_grpc
from cuzk.server.auth import current_identity

log = logging.getLogger("cuzk.server.grpc")
SERVICE_NAME = "cuzk.v1.ProvingEngine"
F = TypeVar("F", bound=Callable[..., Any])


class StartingError(CuzkError):
    """The daemon is still starting: only GetDaemonInfo is answered yet."""


class NotYourJobError(CuzkError):
    """Cancelling a job another client submitted, without management rights (PERMISSION_DENIED)."""


#: Job owners remembered for CancelProof checks; beyond this, owners of finished jobs are forgotten.
MAX_TRACKED_OWNERS = 100_000


_ERROR_CODES: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnknownJobError, grpc.StatusCode.NOT_FOUND),
    (RequestConflictError, grpc.StatusCode.ALREADY_EXISTS),
    (SrsInUseError, grpc.StatusCode.FAILED_PRECONDITION),
    (BudgetError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (QueueFullError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (NotYourJobError, grpc.StatusCode.PERMISSION_DENIED),
    (NotAcceptingError, grpc.StatusCode.UNAVAILABLE),
    (JournalUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (StartingError, grpc.StatusCode.UNAVAILABLE),
    (CuzkError, grpc.StatusCode.FAILED_PRECONDITION),
)


def _rpc(method: F) -> F:
    """Turn engine exceptions into gRPC status codes with their message."""

    @functools.wraps(method)
    def wrapper(self: ProvingService, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            if method.__name__ != "GetDaemonInfo":
                self.check_started()
            return method(self, request, context)
        except Exception as err:
            for kind, code in _ERROR_CODES:
                if isinstance(err, kind):
                    log.info("%s: %s: %s", method.__name__, code.name, err)
                    context.abort(code, str(err))
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}: {err}")

    return wrapper  # type: ignore[return-value]


def request_from_proto(msg: pb.SubmitProofRequest, providers: ProviderRegistry) -> ProofRequest:
    """The engine's request for a SubmitProofRequest, its payload made by the kind's provider (which
    reads the fields it uses); unknown enum values are INVALID_ARGUMENT. Priority 0 (unspecified)
    stays None: the engine gives it the provider's default."""
    try:
        kind = ProofKind(msg.proof_kind)
    except ValueError:
        raise InvalidRequestError(f"invalid proof_kind: {msg.proof_kind}") from None
    if msg.priority not in (0, *Priority):
        raise InvalidRequestError(f"invalid priority: {msg.priority} (0 = kind default, 1 LOW ... 4 CRITICAL)")
    priority = Priority(msg.priority) if msg.priority else None
    return ProofRequest(msg.request_id, kind, priority, providers.payload_from_message(kind, msg))


def result_to_proto(result: JobResult) -> pb.AwaitProofResponse:
    t = result.timings
    return pb.AwaitProofResponse(
        job_id=result.job_id, status=int(result.status), proof=result.proof, error_message=result.error,
        queue_wait_ms=t.queue_wait_ms, srs_load_ms=t.srs_load_ms, synthesis_ms=t.synthesis_ms,
        gpu_compute_ms=t.gpu_compute_ms, total_ms=t.total_ms, verify_ms=t.verify_ms,
        submitted_at_unix_ms=result.submitted_at_unix_ms, started_at_unix_ms=result.started_at_unix_ms,
        finished_at_unix_ms=result.finished_at_unix_ms, proof_kind=result.proof_kind, circuit_id=result.circuit_id,
        partitions=[pb.PartitionTiming(
            index=p.index, synth_start_ms=p.synth_start_ms, synth_end_ms=p.synth_end_ms,
            device_queue_ms=p.device_queue_ms, device_start_ms=p.device_start_ms, device_end_ms=p.device_end_ms,
            device_ordinal=p.device_ordinal, worker=p.worker, batch_size=p.batch_size, planned_ms=p.planned_ms,
            done_ms=p.done_ms, verify_us=p.verify_us, device_phases_us=p.device_phases_us,
            synth_worker=p.synth_worker) for p in result.partitions],
    )


def status_to_proto(status: dict[str, Any]) -> pb.GetStatusResponse:
    gpus = []
    # One GPUStatus per physical device: logical devices sharing a GPU (`gpus.devices = [0, 0]`)
    # report as that GPU once, with the workers of all of them.
    physical: dict[tuple[str, int], dict[str, Any]] = {}
    provers: dict[tuple[str, int], int] = {}
    for d in status["devices"]:
        physical.setdefault((d["kind"], d["ordinal"]), d)
        provers[(d["kind"], d["ordinal"])] = provers.get((d["kind"], d["ordinal"]), 0) + d.get("provers", 0)
    for d in physical.values():
        lanes = [w for w in status["gpu_workers"]
                 if w["gpu_ordinal"] == d["ordinal"] and w["device_kind"] == d["kind"]]
        busy = ([w for w in lanes if w["state"] == "proving"]
                or [w for w in lanes if w["state"] != "idle"])
        # `workers` keeps the Rust daemon's meaning (gpus.gpu_workers_per_device: the lanes that prove at
        # once, not those synthesizing ahead of them), and the lane reserved for CRITICAL work is left
        # out of both counts, though its job may be the current one.
        workers = provers[(d["kind"], d["ordinal"])]
        proving = sum(1 for w in lanes if w["state"] == "proving" and not w.get("reserved_for"))
        is_gpu = d["kind"] != "cpu"
        gpus.append(pb.GPUStatus(
            ordinal=d["ordinal"], name=d["name"], vram_total_bytes=d["memory_total"] if is_gpu else 0,
            vram_free_bytes=d["memory_free"] if is_gpu else 0,
            current_job_id=busy[0]["current_job"] if busy else "",
            current_proof_kind=busy[0]["current_proof_kind"] if busy else "",
            device_kind=d["kind"], workers=workers, busy_workers=min(workers, proving)))
    srs = [pb.SRSStatus(circuit_id=e["circuit_id"], tier=e["tier_value"], size_bytes=e["size_bytes"],
                        ref_count=e["ref_count"], resident_bytes=e["resident_bytes"], idle_ms=e["idle_ms"],
                        load_time_ms=e["load_time_ms"]) for e in status["allocations"]["srs"]]
    queues = [pb.QueueStatus(proof_kind=q["proof_kind"], pending=q["pending"], in_progress=q["in_progress"],
                             planning=q["planning"], synthesizing=q["synthesizing"], proving=q["proving"])
              for q in status["queues"]]
    mem = status["memory"]
    counters = status["counters"]
    return pb.GetStatusResponse(
        gpus=gpus, loaded_srs=srs, queues=queues, total_proofs_completed=counters["total_completed"],
        total_proofs_failed=counters["total_failed"], uptime_seconds=int(status["uptime_secs"]),
        pinned_memory_bytes=mem["used_bytes"], pinned_memory_limit_bytes=mem["total_bytes"],
        memory_budget_bytes=mem["total_bytes"], memory_reserved_bytes=mem["used_bytes"],
        process_rss_bytes=mem["process_rss_bytes"], total_proofs_cancelled=counters["total_cancelled"],
        instance_id=status["instance_id"], draining=not status["accepting"],
    )


class ProvingService(pb_grpc.ProvingEngineServicer):
    def __init__(self, engine: Engine, *, listen_addresses: list[str], started: threading.Event | None = None) -> None:
        self.engine = engine
        self.listen_addresses = listen_addresses
        #: Set when the daemon is ready; None: always (an engine served directly, as in tests).
        self.started = started
        #: job id -> the principal (cuzk.server.auth) that submitted it, for CancelProof.
        self._owners: dict[str, str] = {}
        self._owners_lock = threading.Lock()

    def _record_owner(self, job_id: str) -> None:
        with self._owners_lock:
            self._owners.setdefault(job_id, current_identity().principal)
            if len(self._owners) > MAX_TRACKED_OWNERS:
                for old in [j for j in self._owners if j not in self.engine.jobs]:
                    del self._owners[old]

    def _check_may_cancel(self, job_id: str) -> None:
        identity = current_identity()
        if identity.admin:
            return
        with self._owners_lock:
            owner = self._owners.get(job_id)
        if owner != identity.principal:
            raise NotYourJobError(f"job {job_id} was not submitted by this client ({identity.principal}); cancelling "
                                  "other clients' jobs is a management call (admin token or certificate)")

    def check_started(self) -> None:
        if self.started is not None and not self.started.is_set():
            raise StartingError(f"the daemon (instance {self.engine.instance_id}) is starting; wait until it is "
                                "ready (grpc.health.v1 SERVING)")

    @_rpc
    def SubmitProof(self, request: pb.SubmitProofRequest, context: grpc.ServicerContext) -> pb.SubmitProofResponse:
        outcome = self.engine.submit(request_from_proto(request, self.engine.providers))
        self._record_owner(outcome.job_id)
        return pb.SubmitProofResponse(job_id=outcome.job_id, queue_position=outcome.queue_position,
                                      deduplicated=outcome.deduplicated)

    @_rpc
    def AwaitProof(self, request: pb.AwaitProofRequest, context: grpc.ServicerContext) -> pb.AwaitProofResponse:
        if not request.job_id:
            raise InvalidRequestError("job_id is empty")
        stop = threading.Event()
        if not context.add_callback(stop.set):  # the RPC already ended
            stop.set()
        timeout = request.timeout_ms / 1000 if request.timeout_ms else None
        result = self.engine.await_result(request.job_id, timeout, stop)
        if result is None:  # the client is gone; nobody reads this
            return pb.AwaitProofResponse(job_id=request.job_id)
        return result_to_proto(result)

    @_rpc
    def Prove(self, request: pb.ProveRequest, context: grpc.ServicerContext) -> pb.ProveResponse:
        if not request.HasField("submit"):
            raise InvalidRequestError("missing submit field")
        outcome = self.engine.submit(request_from_proto(request.submit, self.engine.providers), origin="prove")
        self._record_owner(outcome.job_id)
        stop = threading.Event()
        if not context.add_callback(stop.set):  # the RPC already ended
            stop.set()
        self.engine.attach_prove_waiter(outcome.job_id)
        result = None
        try:
            result = self.engine.await_result(outcome.job_id, None, stop)
        finally:
            self.engine.detach_prove_waiter(outcome.job_id, disconnected=result is None)
        if result is None:
            return pb.ProveResponse()
        return pb.ProveResponse(result=result_to_proto(result))

    @_rpc
    def CancelProof(self, request: pb.CancelProofRequest, context: grpc.ServicerContext) -> pb.CancelProofResponse:
        if not request.job_id:
            raise InvalidRequestError("job_id is empty")
        self._check_may_cancel(request.job_id)
        return pb.CancelProofResponse(was_running=self.engine.cancel(request.job_id))

    @_rpc
    def GetStatus(self, request: pb.GetStatusRequest, context: grpc.ServicerContext) -> pb.GetStatusResponse:
        return status_to_proto(self.engine.status())

    @_rpc
    def GetMetrics(self, request: pb.GetMetricsRequest, context: grpc.ServicerContext) -> pb.GetMetricsResponse:
        return pb.GetMetricsResponse(prometheus_text=self.engine.metrics_text())

    @_rpc
    def PreloadSRS(self, request: pb.PreloadSrsRequest, context: grpc.ServicerContext) -> pb.PreloadSrsResponse:
        already, seconds = self.engine.preload_srs(request.circuit_id)
        return pb.PreloadSrsResponse(already_loaded=already, load_time_ms=round(seconds * 1000))

    @_rpc
    def EvictSRS(self, request: pb.EvictSrsRequest, context: grpc.ServicerContext) -> pb.EvictSrsResponse:
        was_loaded, freed = self.engine.evict_srs(request.circuit_id)
        return pb.EvictSrsResponse(was_loaded=was_loaded, freed_bytes=freed)

    @_rpc
    def GetDaemonInfo(self, request: pb.GetDaemonInfoRequest,
                      context: grpc.ServicerContext) -> pb.GetDaemonInfoResponse:
        info = self.engine.info()
        identity = self.engine.identity
        ready = bool(identity.get("ready", self.started is None or self.started.is_set()))
        reply = pb.GetDaemonInfoResponse(
            listen_addresses=self.listen_addresses, ready=ready and self.engine.accepting,
            config_path=identity.get("config_path") or "", state_dir=identity.get("state_dir") or "",
            draining=not self.engine.accepting or bool(identity.get("draining")),
            log_path=identity.get("log_path") or "", **info)
        if not current_identity().authenticated:  # identification only: no paths or addresses
            for name in ("listen_addresses", "config_path", "state_dir", "log_path"):
                reply.ClearField(name)
        return reply
