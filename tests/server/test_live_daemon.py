"""Every cuzk.v1 RPC against a live daemon process, plus HTTP /status and /metrics and the CLI."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cuzk.groth16.formats.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import verify_proof
from cuzk.providers.debug import debug_params_path, debug_public_inputs
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import CuzkClient, build_submit, payload_for_test_circuit

Status = pb.AwaitProofResponse


def submit(rid: str = "", circuit: str = "mimc-3", priority: str = "default",
           **payload: object) -> pb.SubmitProofRequest:
    return build_submit("test", request_id=rid, priority=priority,
                        vanilla_proof=payload_for_test_circuit(circuit, **payload))


def check_proof(result: pb.AwaitProofResponse, params: Path, circuit: str = "mimc-3", *, seed: int = 0,
                partitions: int = 1) -> None:
    assert result.status == Status.COMPLETED, result.error_message
    vk = read_vk(debug_params_path(params, circuit))
    for k, proof in enumerate(proofs_from_bytes(result.proof, expected=partitions)):
        assert verify_proof(vk, proof, debug_public_inputs(circuit, seed + k)), f"partition {k}"


def rpc_error(call: object, *args: object) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args)  # type: ignore[operator]
    return info.value


def wait_idle(client: CuzkClient, timeout: float = 30) -> pb.GetStatusResponse:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.status()
        if all(q.pending == 0 and q.in_progress == 0 for q in status.queues):
            return status
        time.sleep(0.05)
    raise AssertionError("the daemon did not become idle")


def http_get(daemon: object, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://{daemon.http_addr}{path}", timeout=10) as r:  # type: ignore[attr-defined]
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read().decode()


def test_info_health_and_status(daemon) -> None:
    with daemon.client() as c:
        assert c.serving()
        info = c.info()
        assert info.backend == "cpu" and info.test_circuits_enabled and info.pid == daemon.proc.pid
        assert daemon.unix_addr in info.listen_addresses and daemon.tcp_addr in info.listen_addresses
        assert len(info.config_fingerprint) == 16 and "test-circuits" in info.circuit_providers
        assert {"filecoin-porep", "filecoin-snap"} <= set(info.circuit_providers)
        s = c.status()
    assert len(s.gpus) == 1 and s.gpus[0].device_kind == "cpu" and s.gpus[0].workers == 2
    assert s.memory_budget_bytes == 3 << 30 == s.pinned_memory_limit_bytes
    assert 0 < s.memory_reserved_bytes < s.memory_budget_bytes and s.process_rss_bytes > 0
    assert {q.proof_kind for q in s.queues} == {"test-circuit", "porep-c2", "snap-update", "window-post",
                                                 "winning-post"}
    assert s.instance_id == info.instance_id and not s.draining


def test_prove_over_unix_socket_and_tcp(daemon, server_params: Path) -> None:
    for tcp in (False, True):
        with daemon.client(tcp=tcp) as c:
            result = c.prove(submit(partitions=3, seed=21), timeout=120)
        check_proof(result, server_params, seed=21, partitions=3)
        assert result.total_ms >= result.queue_wait_ms and result.circuit_id == "mimc-3"
        assert [p.index for p in result.partitions] == [0, 1, 2]
        assert all(p.synth_start_ms <= p.synth_end_ms <= p.device_start_ms <= p.device_end_ms
                   for p in result.partitions)


def test_submit_then_await(daemon, server_params: Path) -> None:
    with daemon.client() as c:
        out = c.submit(submit("sa-1", "bits-1", partitions=2, seed=5))
        assert out.job_id == "sa-1" and not out.deduplicated and out.assigned_gpu == ""
        check_proof(c.await_proof("sa-1"), server_params, "bits-1", seed=5, partitions=2)
        generated = c.submit(submit(seed=6))
        assert len(generated.job_id) == 32  # no request_id: the daemon names the job
        check_proof(c.await_proof(generated.job_id, 60_000), server_params, seed=6)
        err = rpc_error(c.await_proof, "no-such-job")
        assert err.code() == grpc.StatusCode.NOT_FOUND and "unknown job 'no-such-job'" in err.details()


def test_await_timeout_is_honoured(daemon) -> None:
    with daemon.client() as c:
        c.submit(submit("slow-1", synth_delay_ms=3000))
        start = time.monotonic()
        early = c.await_proof("slow-1", 200)
        assert early.status == Status.TIMEOUT and 0.15 < time.monotonic() - start < 2.5
        assert c.await_proof("slow-1").status == Status.COMPLETED


def test_request_id_is_an_idempotency_key(daemon) -> None:
    with daemon.client() as c:
        first = c.submit(submit("idem-1", synth_delay_ms=400, seed=3))
        second = c.submit(submit("idem-1", synth_delay_ms=400, seed=3))
        assert first.job_id == second.job_id == "idem-1" and second.deduplicated
        err = rpc_error(c.submit, submit("idem-1", seed=4))
        assert err.code() == grpc.StatusCode.ALREADY_EXISTS
        proved = c.prove(submit("idem-1", synth_delay_ms=400, seed=3), timeout=60)
        assert proved.status == Status.COMPLETED and proved.proof == c.await_proof("idem-1").proof
        status = c.status()
    assert sum(q.pending + q.in_progress for q in status.queues) == 0


def test_cancel_queued_and_running_jobs(daemon) -> None:
    with daemon.client() as c:
        before = wait_idle(c).memory_reserved_bytes
        window = json.loads(http_get(daemon, "/status")[2])["counters"]["window"]  # the jobs let in at once
        for k in range(window):
            c.submit(submit(f"busy-{k}", partitions=4, synth_delay_ms=500))
        c.submit(submit("waiting", synth_delay_ms=500))
        assert c.cancel("waiting") is False
        assert c.await_proof("waiting").status == Status.CANCELLED
        assert c.cancel("busy-0") is True
        result = c.await_proof("busy-0")
        assert result.status == Status.CANCELLED and result.error_message == "cancelled by request"
        for k in range(1, window):
            c.cancel(f"busy-{k}")
        after = wait_idle(c)
        deadline = time.monotonic() + 20
        while after.memory_reserved_bytes != before and time.monotonic() < deadline:
            time.sleep(0.05)
            after = c.status()
        assert after.memory_reserved_bytes == before, "cancelled partitions gave their memory back"
        assert all(e.ref_count == 0 for e in after.loaded_srs)
        assert rpc_error(c.cancel, "no-such-job").code() == grpc.StatusCode.NOT_FOUND


def test_a_prove_client_that_disconnects_cancels_its_job(daemon) -> None:
    with daemon.client() as c:
        err = rpc_error(lambda: c.prove(submit("dropped", synth_delay_ms=4000), timeout=0.5))
        assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert c.await_proof("dropped", 20_000).status == Status.CANCELLED  # daemon.on_prove_disconnect = cancel


def test_critical_is_started_before_queued_normal_jobs(daemon) -> None:
    with daemon.client() as c:
        wait_idle(c)
        normals = [f"prio-n{k}" for k in range(6)]
        for rid in normals:
            c.submit(submit(rid, partitions=2, synth_delay_ms=300))
        c.submit(submit("prio-crit", priority="critical"))
        results = {rid: c.await_proof(rid) for rid in [*normals, "prio-crit"]}
    crit = results["prio-crit"]
    assert crit.status == Status.COMPLETED
    queued = [r for r in normals if results[r].started_at_unix_ms > results[normals[0]].started_at_unix_ms + 100]
    assert queued and all(crit.started_at_unix_ms <= results[r].started_at_unix_ms for r in queued)


@pytest.mark.parametrize(("kind", "message"), [
    (1, "POREP_SEAL_COMMIT: vanilla_proof is empty"), (2, "SNAP_DEALS_UPDATE: comm_r_old is required"),
    (3, "WINDOW_POST_PARTITION: registered_proof 0 (StackedDrgWinning2KiBV1) is a WinningPoSt proof"),
    (4, "WINNING_POST: randomness is required"),
])
def test_empty_filecoin_requests_are_refused_clearly(daemon, kind: int, message: str) -> None:
    with daemon.client() as c:
        err = rpc_error(c.submit, pb.SubmitProofRequest(request_id=f"fc-{kind}", proof_kind=kind))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.details(), err.details()
        err = rpc_error(c.prove, pb.SubmitProofRequest(proof_kind=kind))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_malformed_requests_get_invalid_argument(daemon) -> None:
    bad = [
        (pb.SubmitProofRequest(proof_kind=9), "invalid proof_kind: 9"),
        (pb.SubmitProofRequest(proof_kind=0, vanilla_proof=b"{}"), "\"test_circuit\" key"),
        (pb.SubmitProofRequest(proof_kind=0, vanilla_proof=b"\xff"), "not JSON"),
        (submit(circuit="mimc-99"), "mimc-K needs"),
        (pb.SubmitProofRequest(proof_kind=0, priority=7, vanilla_proof=payload_for_test_circuit("mimc-3")),
         "invalid priority: 7"),
        (pb.SubmitProofRequest(proof_kind=4, randomness=b"short"), "randomness must be 32 bytes"),
    ]
    with daemon.client() as c:
        for request, message in bad:
            err = rpc_error(c.submit, request)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.details(), err.details()
        err = rpc_error(c.stub.Prove, pb.ProveRequest())
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "missing submit field" in err.details()
        for call, arg, message in ((c.preload, "porep-16g", "unknown circuit id 'porep-16g'"),
                                   (c.evict, "banana", "unknown circuit id 'banana'"),
                                   (c.await_proof, "", "job_id is empty")):
            err = rpc_error(call, arg)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.details()
        # a Filecoin id whose official parameter file is not in param_cache: named, never generated
        err = rpc_error(c.preload, "porep-32g")
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "v28-stacked-proof-of-replication" in err.details()
        assert "does not exist" in err.details()
        assert c.serving()


def test_failing_partitions_leave_the_daemon_healthy(daemon, server_params: Path) -> None:
    with daemon.client() as c:
        for mode in ("error", "crash", "prove", "unverifiable"):
            result = c.prove(submit(f"broken-{mode}", partitions=2, fail_partition=1, fail_mode=mode), timeout=120)
            assert result.status == Status.FAILED and "partition 1" in result.error_message
        check_proof(c.prove(submit(seed=77), timeout=120), server_params, seed=77)
        assert c.serving() and c.status().total_proofs_failed >= 3


def srs_entry(c: CuzkClient, circuit_id: str) -> pb.SRSStatus:
    return next(e for e in c.status().loaded_srs if e.circuit_id == circuit_id)


def test_preload_evict_and_eviction_under_pressure(daemon, server_params: Path) -> None:
    with daemon.client() as c:
        wait_idle(c)
        for cid in ("mimc-4", "bits-1"):
            c.evict(cid)
        first = c.preload("mimc-4")
        assert not first.already_loaded and c.preload("mimc-4").already_loaded
        c.preload("bits-1")
        a = srs_entry(c, "mimc-4")
        assert a.tier == pb.SRSStatus.HOT and a.size_bytes > 0 and a.resident_bytes > 0 and a.ref_count == 0
        # A job on bits-1 whose partition needs all free memory and half of mimc-4's: mimc-4 (idle, and
        # eviction_min_idle is 0 here) is demoted from hot to warm to make room; bits-1, in use, is not.
        status = c.status()
        need = status.memory_budget_bytes - status.memory_reserved_bytes + a.resident_bytes // 2
        result = c.prove(submit("squeeze", "bits-1", partition_memory=need, seed=8), timeout=120)
        check_proof(result, server_params, "bits-1", seed=8)
        assert srs_entry(c, "mimc-4").tier == pb.SRSStatus.WARM and srs_entry(c, "bits-1").tier == pb.SRSStatus.HOT
        # Asking for more than warm can give pushes it to cold.
        status = c.status()
        need = status.memory_budget_bytes - status.memory_reserved_bytes + a.size_bytes
        check_proof(c.prove(submit("squeeze-2", "bits-1", partition_memory=need, seed=9), timeout=120),
                    server_params, "bits-1", seed=9)
        assert srs_entry(c, "mimc-4").tier == pb.SRSStatus.COLD
        # Explicit eviction, and never while in use.
        c.preload("mimc-4")
        evicted = c.evict("mimc-4")
        assert evicted.was_loaded and evicted.freed_bytes == a.size_bytes + a.resident_bytes
        assert not c.evict("mimc-4").was_loaded
        c.submit(submit("holder", "mimc-4", synth_delay_ms=1500))
        deadline = time.monotonic() + 20
        while srs_entry(c, "mimc-4").ref_count == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        err = rpc_error(c.evict, "mimc-4")
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "in use by 1 job" in err.details()
        assert c.await_proof("holder").status == Status.COMPLETED
        # A partition that can never fit fails its job, and the daemon goes on.
        huge = c.prove(submit("too-big", partition_memory=4 << 30), timeout=60)
        assert huge.status == Status.FAILED and "can never give more than" in huge.error_message


def test_parameters_are_generated_on_first_use(daemon) -> None:
    with daemon.client() as c:
        out = c.preload("mimc-5")
    assert not out.already_loaded and (daemon.root / "params" / "cuzk-test-mimc-5.params").is_file()
    status = json.loads(http_get(daemon, "/status")[2])
    entry = next(e for e in status["allocations"]["srs"] if e["circuit_id"] == "mimc-5")
    assert entry["insecure"] and entry["tier"] == "HOT"


def test_http_status_metrics_and_health(daemon) -> None:
    with daemon.client() as c:
        c.prove(submit("for-metrics"), timeout=60)
        rpc_text = c.metrics()
    code, ctype, body = http_get(daemon, "/status")
    assert code == 200 and ctype == "application/json"
    status = json.loads(body)
    for key in ("pipelines", "gpu_workers", "memory", "synthesis", "allocations", "counters", "queues", "buffers"):
        assert key in status
    job = next(p for p in status["pipelines"] if p["job_id"] == "for-metrics")
    assert job["state"] == "completed" and job["partitions"][0]["state"] == "done"
    assert status["memory"]["total_bytes"] == 3 << 30 and status["gpu_workers"][0]["device_kind"] == "cpu"
    code, ctype, body = http_get(daemon, "/metrics")
    assert code == 200 and ctype.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body)}
    for name in ("cuzk_proofs_completed", "cuzk_proofs_failed", "cuzk_uptime_seconds", "cuzk_queue_depth",
                 "cuzk_running_jobs", "cuzk_gpu_workers", "cuzk_proof_duration_seconds", "cuzk_memory_budget_bytes",
                 "cuzk_partition_stage_seconds", "cuzk_srs_bytes"):
        assert name in families, name
    completed = next(s.value for s in families["cuzk_proofs_completed"].samples if s.name.endswith("_total"))
    assert completed >= 1
    assert {f.name for f in text_string_to_metric_families(rpc_text)} == set(families)
    assert http_get(daemon, "/healthz")[:1] == (200,)
    assert http_get(daemon, "/nope")[0] == 404


def test_concurrent_prove_calls_share_one_job(daemon, server_params: Path) -> None:
    results: list[pb.AwaitProofResponse] = []

    def call() -> None:
        with daemon.client() as c:
            results.append(c.prove(submit("shared-job", synth_delay_ms=500, seed=31), timeout=60))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.proof for r in results}) == 1
    check_proof(results[0], server_params, seed=31)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from cuzk.cli.main import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_client_commands(daemon, capsys: pytest.CaptureFixture[str], tmp_path: Path, server_params: Path) -> None:
    addr = ("--addr", daemon.unix_addr)
    code, out, _ = run_cli(capsys, "status", *addr, "--json")
    assert code == 0 and json.loads(out)["memory_budget_bytes"] == str(3 << 30)
    code, out, _ = run_cli(capsys, "status", *addr)
    assert code == 0 and "device 0 [cpu]" in out
    code, out, _ = run_cli(capsys, "metrics", "--addr", daemon.tcp_addr)
    assert code == 0 and "cuzk_proofs_completed_total" in out
    code, out, _ = run_cli(capsys, "preload", "mimc-4", *addr, "--json")
    assert code == 0 and "already_loaded" in json.loads(out)
    code, out, _ = run_cli(capsys, "evict", "mimc-4", *addr)
    assert code == 0 and "mimc-4: evicted" in out
    proof_file = tmp_path / "proof.bin"
    code, out, _ = run_cli(capsys, "prove", *addr, "--kind", "test", "--test-circuit", "mimc-3", "--partitions", "2",
                           "--seed", "12", "--out", proof_file, "--request-id", "cli-1")
    assert code == 0 and "status:   COMPLETED" in out and "384 bytes (2 partition proofs)" in out
    vk = read_vk(debug_params_path(server_params, "mimc-3"))
    proofs = proofs_from_bytes(proof_file.read_bytes(), expected=2)
    assert all(verify_proof(vk, p, debug_public_inputs("mimc-3", 12 + k)) for k, p in enumerate(proofs))
    code, out, _ = run_cli(capsys, "prove", *addr, "--kind", "test", "--test-circuit", "mimc-3", "--partitions", "2",
                           "--seed", "12", "--json", "--request-id", "cli-1")
    assert code == 0 and bytes.fromhex(json.loads(out)["proof_hex"]) == proof_file.read_bytes()  # same job
    code, out, _ = run_cli(capsys, "cancel", "cli-1", *addr, "--json")
    assert code == 0 and json.loads(out) == {"job_id": "cli-1", "was_running": False}
    code, _, err = run_cli(capsys, "cancel", "missing-job", *addr)
    assert code == 2 and "NOT_FOUND" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "prove", *addr, "--kind", "porep", "--c1", proof_file)
    assert code == 2 and "INVALID_ARGUMENT: POREP_SEAL_COMMIT: the payload is neither JSON nor a bincode C1" in err
    code, _, err = run_cli(capsys, "prove", *addr, "--kind", "winning", "--randomness", "abcd")
    assert code == 2 and "--randomness: needs 32 bytes" in err
    code, _, err = run_cli(capsys, "status", "--addr", f"unix://{tmp_path / 'nobody.sock'}")
    assert code == 2 and "UNAVAILABLE" in err
