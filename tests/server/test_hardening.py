"""What bad input does to a live daemon: oversized and malformed requests and a full queue are each refused
with a clear status, while the daemon stays healthy, its journal consistent and its memory within budget."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from pathlib import Path

import grpc
import pytest
from server.conftest import LiveDaemon, start_daemon

from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import CuzkClient, build_submit, payload_for_test_circuit

MAX_MESSAGE = 1 << 20
MAX_QUEUED = 3
BUDGET = 3 << 30
SUBMIT = "/cuzk.v1.ProvingEngine/SubmitProof"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, server_params: Path) -> LiveDaemon:
    d = start_daemon(tmp_path_factory.mktemp("hardening"), server_params,
                     daemon={"max_message_size": "1MiB", "max_queued_jobs": MAX_QUEUED},
                     memory={"total_budget": "3GiB"}, pipeline={"synthesis_lookahead": 0})
    yield d
    assert d.stop() == 0, d.log()


def journal_rows(d: LiveDaemon) -> dict[str, str]:
    with sqlite3.connect(f"file:{d.root / 'state' / 'journal.sqlite3'}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT job_id, state FROM jobs").fetchall())


def check_journal(d: LiveDaemon) -> None:
    """The SQLite file is intact and holds inputs only for jobs still in flight."""
    with sqlite3.connect(f"file:{d.root / 'state' / 'journal.sqlite3'}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        orphans = db.execute("SELECT COUNT(*) FROM requests WHERE digest NOT IN "
                             "(SELECT digest FROM jobs WHERE state = 'accepted')").fetchone()[0]
        assert orphans == 0


def assert_healthy(d: LiveDaemon, client: CuzkClient) -> pb.GetStatusResponse:
    assert d.alive and client.serving()
    status = client.status()
    assert status.process_rss_bytes <= BUDGET and d.tree_rss() <= BUDGET, (status.process_rss_bytes, d.tree_rss())
    return status


def refusal(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    return info.value.code(), info.value.details() or ""


def mimc(rid: str, **payload: object) -> pb.SubmitProofRequest:
    return build_submit("test", request_id=rid, vanilla_proof=payload_for_test_circuit("mimc-3", **payload))


def hostile_requests() -> list[tuple[str, pb.SubmitProofRequest, str]]:
    deep = b"[" * 200_000
    long_number = b"9" * 20_000
    wrapper = json.dumps({"SectorNum": 1, "SectorSize": 2048, "Phase1Out": base64.b64encode(b"{" + deep).decode()})
    return [
        ("deeply nested test payload", pb.SubmitProofRequest(proof_kind=0, vanilla_proof=b'{"a": ' + deep),
         "not JSON"),
        ("20,000-digit number", pb.SubmitProofRequest(proof_kind=0, vanilla_proof=b'{"test_circuit": ' + long_number
                                                      + b"}"), "not JSON"),
        ("deeply nested Curio wrapper", pb.SubmitProofRequest(proof_kind=1, vanilla_proof=b'{"x": ' + deep),
         "not valid JSON"),
        ("wrapper around a nested C1", pb.SubmitProofRequest(proof_kind=1, vanilla_proof=wrapper.encode()),
         "registered_proof"),
        ("bincode C1 of the wrong size", pb.SubmitProofRequest(proof_kind=1, registered_proof=5,
                                                               vanilla_proof=b"\x01" * 4096), "neither JSON nor"),
        ("absurd vanilla proof count", pb.SubmitProofRequest(proof_kind=2, registered_proof=0, comm_r_old=bytes(32),
                                                             comm_r_new=bytes(32), comm_d_new=bytes(32),
                                                             vanilla_proofs=[b"x"] * 50_000), "vanilla_proofs"),
        ("WinningPoSt proof of the wrong size", pb.SubmitProofRequest(proof_kind=4, registered_proof=0,
                                                                      randomness=bytes(32),
                                                                      vanilla_proofs=[bytes(100)]), "bytes"),
        ("over-long request_id", mimc("r" * 10_000), "request_id"),
        ("control characters in request_id", mimc("bad\x00id"), "request_id"),
        ("unknown proof kind", pb.SubmitProofRequest(proof_kind=77), "invalid proof_kind"),
        ("unknown circuit", build_submit("test", vanilla_proof=payload_for_test_circuit("mimc-99")), "mimc-K"),
    ]


def test_oversized_and_malformed_requests_are_refused(guarded: LiveDaemon) -> None:
    with guarded.client() as c:
        before = assert_healthy(guarded, c)
        rows_before = journal_rows(guarded)
        # over daemon.max_message_size: gRPC refuses it before cuzk sees it
        code, details = refusal(lambda: c.submit(mimc("huge", padding="x" * (2 * MAX_MESSAGE))))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details, details
        # bytes that are not a SubmitProofRequest at all
        raw = c.channel.unary_unary(SUBMIT, request_serializer=None, response_deserializer=None)
        code, details = refusal(lambda: raw(b"\xff\xff\xff\xff\x0f", timeout=20))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid SubmitProof message" in details, details
        for name, request, message in hostile_requests():
            code, details = refusal(lambda request=request: c.submit(request))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (name, code, details)
            assert message in details, (name, details)
            assert len(details) < 2000, (name, len(details))  # the reason, not an echo of the input
        after = assert_healthy(guarded, c)
        # nothing was reserved, queued or journaled for any of them
        assert after.memory_reserved_bytes == before.memory_reserved_bytes
        assert all(q.pending == 0 and q.in_progress == 0 for q in after.queues)
        assert journal_rows(guarded) == rows_before
        check_journal(guarded)
        result = c.prove(mimc("still-works", seed=2), timeout=120)
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
    assert "Traceback" not in guarded.log()


def test_a_full_queue_answers_resource_exhausted(guarded: LiveDaemon) -> None:
    accepted: list[str] = []
    with guarded.client() as c:
        for k in range(12):
            try:
                accepted.append(c.submit(mimc(f"fill-{k}", seed=k, partitions=2, synth_delay_ms=2000)).job_id)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.details()
                assert "daemon.max_queued_jobs" in err.details()
                break
        else:
            pytest.fail("12 slow jobs were all accepted with max_queued_jobs = 3")
        waiting = sum(q.pending for q in c.status().queues)
        assert waiting == MAX_QUEUED, waiting
        # resubmitting an accepted job is still answered (it adds nothing to the queue)
        assert c.submit(mimc(f"fill-{len(accepted) - 1}", seed=len(accepted) - 1, partitions=2,
                             synth_delay_ms=2000)).deduplicated
        refused_id = f"fill-{len(accepted)}"
        for job_id in accepted:
            c.cancel(job_id)
        for job_id in accepted:
            assert c.await_proof(job_id, 60_000).status == pb.AwaitProofResponse.CANCELLED
        deadline = time.monotonic() + 30
        while any(q.pending or q.in_progress for q in c.status().queues) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.submit(mimc("after-the-rush", seed=99)).job_id == "after-the-rush"
        assert c.await_proof("after-the-rush", 120_000).status == pb.AwaitProofResponse.COMPLETED
        rows = journal_rows(guarded)
        assert refused_id not in rows and all(rows[j] == "cancelled" for j in accepted)
        check_journal(guarded)
        assert_healthy(guarded, c)
