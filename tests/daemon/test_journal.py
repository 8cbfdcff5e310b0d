"""The SQLite job journal, alone and wired into an engine (no worker processes are started here)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from cuzk.config import config_from_dict
from cuzk.engine.engine import Engine, FinishedJob, JobInfo, RequestConflictError
from cuzk.engine.executors import make_executor
from cuzk.engine.jobs import JobResult, PartitionTiming, Priority, ProofKind, ProofRequest, ProofTimings, ResultStatus
from cuzk.engine.journal import (
    MAX_ATTEMPTS,
    SCHEMA_VERSION,
    Journal,
    JournalError,
    JournalUnavailableError,
    decode_request,
    encode_request,
)
from cuzk.engine.providers import InvalidRequestError, ProviderRegistry
from cuzk.providers import build_providers, default_providers
from cuzk.providers.fields import submit_request


def request(rid: str, seed: int = 0, **extra: object) -> ProofRequest:
    body = json.dumps({"test_circuit": "mimc-3", "seed": seed, **extra}).encode()
    return submit_request(rid, ProofKind.TEST, Priority.NORMAL, vanilla_proof=body)


def info(job_id: str, req: ProofRequest) -> JobInfo:
    return JobInfo(job_id, req.proof_kind.label, req.priority.name, "mimc-3", req.digest(), round(time.time() * 1000))


def open_journal(path: Path, instance: str = "aaaa0000aaaa", *, keep: bool = True, retention: float = 3600,
                 max_results: int = 100) -> Journal:
    return Journal(path, instance_id=instance, keep_requests=keep, retention_s=retention, max_results=max_results)


def accept(journal: Journal, job_id: str, req: ProofRequest) -> JobInfo:
    i = info(job_id, req)
    journal.stage_request(i.digest, req)
    journal.job_accepted(i)
    journal.unstage_request(i.digest)
    return i


def completed(i: JobInfo, proof: bytes = b"\x01" * 192) -> JobResult:
    return JobResult(i.job_id, ResultStatus.COMPLETED, proof=proof, timings=ProofTimings(total_ms=5),
                     proof_kind=i.proof_kind, circuit_id="mimc-3", submitted_at_unix_ms=i.submitted_at_unix_ms,
                     finished_at_unix_ms=round(time.time() * 1000),
                     partitions=(PartitionTiming(0, 1, 2, 3, 4, 5, 0, "w0", 1),))


def providers(tmp_path: Path) -> ProviderRegistry:
    return build_providers(str(tmp_path), test_circuits=True)


def test_requests_round_trip_through_their_provider(tmp_path: Path) -> None:
    req = submit_request("r", ProofKind.WINDOW_POST_PARTITION, Priority.HIGH, sector_size=1 << 35,
                         registered_proof=13, vanilla_proofs=[b"a" * 5, b"", b"\x00\xff"], randomness=bytes(range(32)),
                         partition_index=3, miner_id=1000, comm_r_old=b"\x07" * 32)
    data = encode_request(req)
    again = decode_request(data, providers(tmp_path))
    assert again == req and again.digest() == req.digest()
    with pytest.raises(ValueError, match="longer than its header says"):
        decode_request(data + b"x", providers(tmp_path))
    with pytest.raises(InvalidRequestError, match="test circuits are disabled"):
        decode_request(encode_request(request("t")), build_providers(str(tmp_path), test_circuits=False))


def test_finished_results_survive_and_the_journal_is_wal(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    journal = open_journal(path)
    i = accept(journal, "done", request("done"))
    journal.job_finished(i, completed(i))
    journal.close()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    recovery = open_journal(path, "bbbb1111bbbb").recover("requeue")
    assert recovery.requeue == [] and recovery.failed_now == []
    [job] = recovery.finished
    assert (job.job_id, job.digest, job.proof_kind, job.result.status) == ("done", i.digest, ProofKind.TEST,
                                                                          ResultStatus.COMPLETED)
    assert job.result.proof == b"\x01" * 192 and job.result.partitions[0].worker == "w0"
    assert job.result.timings.total_ms == 5 and job.result.circuit_id == "mimc-3"


def test_in_flight_jobs_are_requeued_with_their_inputs_at_most_max_attempts(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    req = request("slow", seed=4, synth_delay_ms=10)
    accept(open_journal(path, "0000000000a1"), "slow", req)  # the daemon dies with the job in flight
    for attempt in range(2, MAX_ATTEMPTS + 1):
        journal = open_journal(path, f"0000000000b{attempt}")
        recovery = journal.recover("requeue")
        assert recovery.requeue == [("slow", req.digest())], attempt
        assert journal.load_request(req.digest(), providers(tmp_path)) == req
        accept(journal, "slow", req)  # what the engine does when it re-queues it
        assert journal.row("slow")["attempts"] == attempt
    recovery = open_journal(path, "0000000000c1").recover("requeue")
    assert recovery.requeue == [] and recovery.failed_now == ["slow"]
    [failed] = recovery.finished
    assert failed.result.status is ResultStatus.FAILED and "not re-queued again" in failed.result.error


def test_in_flight_jobs_fail_with_the_reason_under_the_fail_policy(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    first = open_journal(path, "0123456789ab", keep=False)
    accept(first, "lost", request("lost"))
    assert first._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0  # "fail" keeps no inputs
    recovery = open_journal(path, "ba9876543210", keep=False).recover("fail")
    [job] = recovery.finished
    assert recovery.failed_now == ["lost"] and job.result.status is ResultStatus.FAILED
    assert "instance 0123456789ab" in job.result.error and 'daemon.on_restart = "fail"' in job.result.error
    # Accepted under "fail" (inputs not kept), recovered under "requeue": failed, saying why.
    accept(open_journal(path, "0123456789ab", keep=False), "lost2", request("lost2"))
    recovery = open_journal(path, "ba9876543210").recover("requeue")
    assert recovery.failed_now == ["lost2"]
    assert "inputs were not kept" in next(j for j in recovery.finished if j.job_id == "lost2").result.error


def test_retention_and_limits_prune_finished_rows_and_unused_inputs(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    for k in range(5):
        i = accept(journal, f"j{k}", request(f"j{k}", seed=k))
        journal.job_finished(i, completed(i))
    accept(journal, "running", request("running", seed=99))
    assert journal.counts() == {"completed": 5, "accepted": 1}
    assert journal._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1  # only the unfinished job's
    journal.close()
    assert open_journal(path, max_results=2).counts() == {"completed": 2, "accepted": 1}
    time.sleep(0.05)
    assert open_journal(path, retention=0.01).counts() == {"accepted": 1}


def test_a_request_id_reused_after_failure_starts_over(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "j.sqlite3")
    i = accept(journal, "rid", request("rid"))
    journal.job_finished(i, JobResult("rid", ResultStatus.FAILED, error="boom", finished_at_unix_ms=1))
    accept(journal, "rid", request("rid", seed=1))
    row = journal.row("rid")
    assert row["state"] == "accepted" and row["attempts"] == 1 and row["error"] is None


def test_engine_records_jobs_and_answers_restored_results(tmp_path: Path) -> None:
    config = config_from_dict({"srs": {"param_cache": str(tmp_path)}, "memory": {"total_budget": "3GiB"},
                               "debug": {"test_circuits": True}})
    # Not started: submissions queue, nothing runs.
    engine = Engine(config, executor=make_executor(config), providers=default_providers(config))
    journal = open_journal(tmp_path / "j.sqlite3", engine.instance_id)
    old = info("old", request("old"))
    engine.restore_finished([FinishedJob("old", old.digest, ProofKind.TEST, Priority.NORMAL, completed(old))])
    engine.attach_journal(journal)
    result = engine.await_result("old", 1.0)
    assert result is not None and result.status is ResultStatus.COMPLETED and result.proof == b"\x01" * 192
    again = engine.submit(request("old"))  # the same request_id and inputs: the same (finished) job
    assert again.deduplicated and again.job_id == "old"
    assert journal.row("old") is None  # restored results are not written again
    outcome = engine.submit(request("new", seed=3))
    assert not outcome.deduplicated and journal.row("new")["state"] == "accepted"
    unset = submit_request("unset", ProofKind.TEST, None, vanilla_proof=b'{"test_circuit": "mimc-3"}')
    engine.submit(unset)  # no priority: the provider's default, in the job and the journal
    assert engine.jobs["unset"].priority is Priority.NORMAL and journal.row("unset")["priority"] == "NORMAL"
    engine.cancel("unset")
    assert journal._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1
    with pytest.raises(RequestConflictError):
        engine.submit(request("new", seed=4))
    assert journal._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1  # the refused inputs are gone
    requeued = engine.submit(request("", seed=5), job_id="kept-id", origin="journal")
    assert requeued.job_id == "kept-id"
    engine.cancel("new")
    row = journal.row("new")
    assert row["state"] == "cancelled" and row["error"] == "cancelled by request"
    assert journal._db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 1  # only kept-id's now


class FullDisk:
    """Stands in for a journal's connection: while `full`, every write fails as SQLite reports ENOSPC."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.full = False
        self.refused = 0

    def execute(self, sql: str, params: tuple = ()) -> sqlite3.Cursor:
        if self.full and sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            self.refused += 1
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, params)

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


def test_a_full_disk_refuses_new_jobs_clearly_and_recovers_when_space_returns(tmp_path: Path) -> None:
    config = config_from_dict({"srs": {"param_cache": str(tmp_path)}, "memory": {"total_budget": "3GiB"},
                               "debug": {"test_circuits": True}})
    # Not started: submissions queue, nothing runs.
    engine = Engine(config, executor=make_executor(config), providers=default_providers(config))
    (tmp_path / "state").mkdir()
    journal = open_journal(tmp_path / "state" / "j.sqlite3", engine.instance_id)
    disk = FullDisk(journal._db)
    journal._db = disk  # type: ignore[assignment]
    engine.attach_journal(journal)
    engine.submit(request("before", seed=1))
    disk.full = True
    with pytest.raises(JournalUnavailableError) as refused:
        engine.submit(request("during", seed=2))
    message = str(refused.value)
    assert str(tmp_path / "state") in message and "database or disk is full" in message and "retry" in message
    assert "during" not in engine.jobs and journal.row("during") is None  # never accepted unrecorded
    assert not journal._staged  # the refused inputs are not held for ever
    assert journal.state() == {"path": str(journal.path), "writable": False, "error": "database or disk is full",
                               "unwritten_results": 0}
    # A job accepted before keeps going: its result is kept in memory and answered...
    engine.cancel("before")
    result = engine.await_result("before", 1.0)
    assert result is not None and result.status is ResultStatus.CANCELLED
    assert journal.row("before")["state"] == "accepted" and journal.flush() == 1
    assert engine.status()["journal"]["unwritten_results"] == 1
    # ...and written once space returns; the next submission is accepted.
    disk.full = False
    assert journal.flush() == 0 and journal.row("before")["state"] == "cancelled"
    assert engine.submit(request("during", seed=2)).job_id == "during"
    assert journal.row("during")["state"] == "accepted" and journal.state()["writable"]
    assert journal._db.execute("SELECT COUNT(*) FROM requests WHERE digest = ?",
                               (request("during", seed=2).digest(),)).fetchone()[0] == 1


def test_a_result_kept_while_full_is_written_before_the_next_accepted_job(tmp_path: Path) -> None:
    journal = open_journal(tmp_path / "j.sqlite3")
    disk = FullDisk(journal._db)
    journal._db = disk  # type: ignore[assignment]
    i = accept(journal, "a", request("a"))
    disk.full = True
    journal.job_finished(i, completed(i))  # kept, not raised: the waiters still get it from the engine
    with pytest.raises(JournalUnavailableError):
        accept(journal, "b", request("b", seed=1))
    disk.full = False
    accept(journal, "b", request("b", seed=1))
    assert journal.row("a")["state"] == "completed" and journal.row("b")["state"] == "accepted"
    journal.close()
    [done] = open_journal(tmp_path / "j.sqlite3", "cccc2222cccc").recover("requeue").finished
    assert done.job_id == "a" and done.result.proof == b"\x01" * 192


def test_a_result_never_written_is_found_in_flight_at_the_next_start(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "j.sqlite3"
    journal = open_journal(path)
    disk = FullDisk(journal._db)
    journal._db = disk  # type: ignore[assignment]
    req = request("lost", seed=7)
    i = accept(journal, "lost", req)
    disk.full = True
    journal.job_finished(i, completed(i))
    journal.close()  # still full: says so, naming the job
    assert "1 result(s) could not be written" in caplog.text and "lost" in caplog.text
    recovery = open_journal(path, "dddd3333dddd").recover("requeue")
    assert recovery.requeue == [("lost", req.digest())]  # run again, not lost


def test_a_real_full_file_system_refuses_and_recovers(tmp_path: Path) -> None:
    """The same on a 1 MiB tmpfs filled to the last byte (needs the right to mount; skipped elsewhere)."""
    state = tmp_path / "state"
    state.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(state)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        journal = open_journal(state / "journal.sqlite3")
        accept(journal, "first", request("first"))
        ballast = state / "ballast"
        with open(ballast, "wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
        with pytest.raises(JournalUnavailableError, match="database or disk is full"):
            for k in range(64):  # the WAL's pages already allocated take a few writes to exhaust
                accept(journal, f"j{k}", request(f"j{k}", seed=k, pad="x" * 4096))
        assert not journal.state()["writable"]
        ballast.unlink()
        accept(journal, "after", request("after", seed=99))
        assert journal.row("after")["state"] == "accepted" and journal.state()["writable"]
        journal.close()
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


FIXTURES = Path(__file__).parents[1] / "fixtures" / "journal"
#: The fixture's jobs finished in 2025: keep them whatever the date of the run.
A_CENTURY = 100 * 365 * 86400


def test_a_schema_1_journal_is_read(tmp_path: Path) -> None:
    """A journal written by the code before payloads were the providers' (tests/fixtures/journal/README.md):
    every job is recovered, its kept inputs read back field for field, with the digest they were kept under."""
    path = tmp_path / "journal.sqlite3"
    shutil.copyfile(FIXTURES / "schema1.sqlite3", path)
    registry = providers(tmp_path)
    journal = open_journal(path, "bbbb2222bbbb", retention=A_CENTURY)
    assert journal._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION)
    recovery = journal.recover("requeue")
    assert recovery.failed_now == []
    assert [job_id for job_id, _ in recovery.requeue] == ["test-queued", "wpost-queued", "snap-queued"]
    kept = {job_id: journal.load_request(digest, registry) for job_id, digest in recovery.requeue}
    assert kept == {
        "test-queued": submit_request("test-queued", ProofKind.TEST, Priority.LOW,
                                      vanilla_proof=json.dumps({"test_circuit": "mimc-3", "seed": 5}).encode()),
        "wpost-queued": submit_request("wpost-queued", ProofKind.WINDOW_POST_PARTITION, Priority.HIGH,
                                       sector_size=2048, registered_proof=10,
                                       vanilla_proofs=[b"\x01" * 40, b"\x02" * 7], randomness=bytes(range(32)),
                                       partition_index=3, miner_id=1000),
        "snap-queued": submit_request("snap-queued", ProofKind.SNAP_DEALS_UPDATE, Priority.NORMAL,
                                      vanilla_proofs=[b"\x03" * 9], comm_r_old=b"\x04" * 32,
                                      comm_r_new=b"\x05" * 32, comm_d_new=b"\x06" * 32),
    }
    assert [kept[job_id].digest() for job_id, _ in recovery.requeue] == [d for _, d in recovery.requeue]
    [done] = recovery.finished
    assert (done.job_id, done.proof_kind, done.priority, done.result.status) == (
        "porep-done", ProofKind.POREP_SEAL_COMMIT, Priority.NORMAL, ResultStatus.COMPLETED)
    assert done.result.proof == b"\x09" * 192 and done.result.circuit_id == "porep-2k"
    assert done.result.timings.synthesis_ms == 11 and done.result.partitions[0].worker == "cpu0/0"

    # Taken over by an engine: the finished job answers (the same inputs sent again are that job), the
    # test-circuit job is queued again under its id, one attempt further on.
    config = config_from_dict({"srs": {"param_cache": str(tmp_path)}, "memory": {"total_budget": "3GiB"},
                               "debug": {"test_circuits": True}})
    engine = Engine(config, executor=make_executor(config), providers=default_providers(config))
    engine.restore_finished(recovery.finished)
    engine.attach_journal(journal)
    assert engine.submit(kept["test-queued"], job_id="test-queued", origin="journal").job_id == "test-queued"
    row = journal.row("test-queued")
    assert (row["state"], row["attempts"], row["priority"]) == ("accepted", 2, "LOW")
    porep = submit_request("porep-done", ProofKind.POREP_SEAL_COMMIT, sector_size=2048, sector_number=7,
                           miner_id=1000, vanilla_proof=b'{"registered_proof": "StackedDrg2KiBV1_1"}')
    assert engine.submit(porep).deduplicated
    # A Filecoin job whose kept inputs its provider refuses now fails at re-queue, naming why.
    with pytest.raises(InvalidRequestError, match="WINDOW_POST_PARTITION"):
        engine.submit(kept["wpost-queued"], job_id="wpost-queued", origin="journal")


def test_a_journal_of_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    open_journal(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="schema version 9, this cuzk reads 1, 2"):
        open_journal(path)
