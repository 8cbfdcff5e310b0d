"""Each lifecycle failure of the Rust daemon, staged for real with `cuzk daemon ...` processes.

Readiness and state are polled with deadlines (never slept on); every process a test starts is killed
by pid (start time checked) in the fixtures' finalizers, whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from daemon.conftest import (
    READY_S,
    Reaper,
    Site,
    cuzk,
    measure_cli_startup,
    port_bindable,
    wait_for,
)

from cuzk import __version__
from cuzk.config import config_from_dict, load_config
from cuzk.daemon.identity import Identity
from cuzk.daemon.pidfile import ProcessRef, process_start_ticks
from cuzk.groth16.formats.params_file import read_vk
from cuzk.groth16.proof import proofs_from_bytes
from cuzk.groth16.verifier import verify_proof
from cuzk.providers.debug import debug_params_path, debug_public_inputs
from cuzk.server._gen import proving_pb2 as pb
from cuzk.server.client import CuzkClient, build_submit, payload_for_test_circuit

pytestmark = pytest.mark.slow
Status = pb.AwaitProofResponse


def job(rid: str, *, partitions: int = 1, delay_ms: int = 0, seed: int = 0) -> pb.SubmitProofRequest:
    return build_submit("test", request_id=rid, vanilla_proof=payload_for_test_circuit(
        "mimc-3", partitions=partitions, seed=seed, synth_delay_ms=delay_ms))


def assert_proof(result: pb.AwaitProofResponse, params: Path, *, partitions: int = 1, seed: int = 0) -> None:
    assert result.status == Status.COMPLETED, result.error_message
    vk = read_vk(debug_params_path(params, "mimc-3"))
    for k, proof in enumerate(proofs_from_bytes(result.proof, expected=partitions)):
        assert verify_proof(vk, proof, debug_public_inputs("mimc-3", seed + k)), f"partition {k}"


def wait_in_flight(client: CuzkClient, timeout: float = 60) -> None:
    """Until a test-circuit job has left the queue (planning, synthesis or proving)."""
    def busy() -> bool:
        return any(q.proof_kind == "test-circuit" and q.in_progress > 0 for q in client.status().queues)

    wait_for(busy, timeout, "a job in flight")


def record(site: Site) -> Identity:
    ident = Identity.from_record(site.state.read_record())
    assert ident is not None, "no instance record"
    return ident


def journal_state(site: Site, job_id: str) -> str | None:
    with sqlite3.connect(site.state.journal_path) as db:
        row = db.execute("SELECT state FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    return row[0] if row else None


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, lifecycle_params: Path) -> Iterator[tuple[Site, dict]]:
    """One daemon started with `cuzk daemon start`, for the tests that leave it as it was."""
    reaper = Reaper()
    try:
        site = Site(tmp_path_factory.mktemp("running") / "site", lifecycle_params, reaper)
        started = site.start()
        yield site, started
        stopped = site.stop()
        assert stopped.returncode == 0, stopped.stderr
    finally:
        reaper.cleanup()


# -- identity -----------------------------------------------------------------------------------------------------
def test_start_reports_the_identity_everywhere(running: tuple[Site, dict]) -> None:
    site, st = running
    fingerprint = load_config(site.config).fingerprint()
    assert st["running"] and st["ready"] and st["phase"] == "ready" and st["version"] == __version__
    assert (st["config_fingerprint"], st["config_path"]) == (fingerprint, str(site.config))
    assert st["listen"] == [site.unix_addr, site.tcp_addr] and st["started_at"].endswith("Z")
    assert st["pid"] > 0 and len(st["instance_id"]) == 12 and st["state_dir"] == str(site.state_dir)
    code, status = site.status()
    assert code == 0 and status["ready"] and status["instance_id"] == st["instance_id"] and status["answering"]
    with site.client() as c:
        info = c.info()
        assert (info.instance_id, info.pid, info.config_fingerprint) == (st["instance_id"], st["pid"], fingerprint)
        assert info.ready and not info.draining and info.config_path == str(site.config)
        assert info.state_dir == str(site.state_dir) and info.log_path == st["log_path"]
        assert c.serving() and c.status().instance_id == st["instance_id"]
    with urllib.request.urlopen(f"http://{site.http_addr}/status", timeout=10) as r:
        page = json.loads(r.read())
    assert (page["instance_id"], page["config_fingerprint"], page["pid"]) == (st["instance_id"], fingerprint, st["pid"])
    assert page["listen"] == st["listen"] and page["ready"] and page["version"] == __version__
    assert page["started_at"] == st["started_at"] and page["config_path"] == str(site.config)
    # Every log line names this instance, and "ready" comes after the engine started.
    lines = [line for line in Path(st["log_path"]).read_text().splitlines() if line.strip()]
    assert lines and all(f"instance={st['instance_id']}" in line for line in lines), lines
    engine_at = next(k for k, line in enumerate(lines) if "engine started" in line)
    ready_at = next(k for k, line in enumerate(lines) if "cuzk daemon ready" in line)
    assert engine_at < ready_at
    shown = site.cli("daemon", "logs", "--config", site.config)
    assert shown.returncode == 0 and f"instance {st['instance_id']}, running" in shown.stderr
    assert "cuzk daemon ready" in shown.stdout


def test_prove_names_the_daemon_and_refuses_another_config(running: tuple[Site, dict]) -> None:
    site, st = running
    fp = st["config_fingerprint"]
    args = ("prove", "-a", site.tcp_addr, "--kind", "test", "--test-circuit", "mimc-3")
    ok = cuzk(*args, "--expect-config", fp, "--json")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["status"] == "COMPLETED" and out["daemon"]["instance_id"] == st["instance_id"]
    assert out["daemon"]["config_fingerprint"] == fp
    text = cuzk(*args, "--seed", "1")
    assert text.returncode == 0 and f"daemon:   instance {st['instance_id']}, config {fp}" in text.stdout
    refused = cuzk(*args, "--request-id", "never-submitted", "--expect-config", "0123456789abcdef")
    assert refused.returncode == 2 and "refusing to run" in refused.stderr and fp in refused.stderr
    with site.client() as c:
        with pytest.raises(grpc.RpcError) as err:
            c.await_proof("never-submitted", 1)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_second_daemon_fails_fast_naming_the_first_which_keeps_serving(running: tuple[Site, dict],
                                                                         tmp_path: Path) -> None:
    site, st = running
    baseline = measure_cli_startup()
    named = (f"pid {st['pid']}", f"instance {st['instance_id']}", str(site.config), st["config_fingerprint"])

    def other(listen: str, name: str) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(config_from_dict({"daemon": {"listen": [listen], "state_dir": str(tmp_path / name)},
                                          "memory": {"total_budget": "3GiB"}}).to_toml())
        return path

    for listen, expected in ((site.tcp_addr, f"cannot listen on {site.tcp_addr}: address in use by a cuzk daemon"),
                             (site.unix_addr, "another process is already listening on unix://")):
        t0 = time.monotonic()
        second = cuzk("daemon", "run", "--config", other(listen, f"other{len(listen)}"), timeout=60)
        elapsed = time.monotonic() - t0
        assert second.returncode == 2 and expected in second.stderr, second.stderr
        assert all(part in second.stderr for part in named), second.stderr
        assert elapsed < baseline + 2.0, f"took {elapsed:.2f} s (the CLI alone takes {baseline:.2f} s)"
    # The same state directory: refused by the pid file lock, naming the holder.
    for command in ("run", "start"):
        same = cuzk("daemon", command, "--config", site.config, timeout=60)
        assert same.returncode == 2 and "already running" in same.stderr, same.stderr
        assert f"pid {st['pid']}" in same.stderr and f"instance {st['instance_id']}" in same.stderr
    # The first one never noticed.
    assert Path(site.unix_addr.removeprefix("unix://")).exists()
    with site.client() as c:
        assert c.serving() and c.info().instance_id == st["instance_id"]
        assert_proof(c.prove(job("after-second", seed=2), timeout=120), site.root / "params", seed=2)
    code, status = site.status()
    assert code == 0 and status["ready"] and status["pid"] == st["pid"]


def test_restart_with_an_invalid_config_leaves_the_daemon_running(running: tuple[Site, dict]) -> None:
    site, st = running
    original = site.config.read_text()
    try:
        site.config.write_text(original.replace("sort_by_type = false", "sort_by_kind = true"))
        bad = site.cli("daemon", "restart", "--config", site.config)
        assert bad.returncode == 2 and "unknown key scheduler.sort_by_kind" in bad.stderr, bad.stderr
        assert "the running daemon is left as it is" in bad.stderr
        site.config.write_text(original.replace("preload = []", 'preload = ["mimc-99"]'))
        bad = site.cli("daemon", "restart", "--config", site.config)
        assert bad.returncode == 2 and "srs.preload" in bad.stderr and "left as it is" in bad.stderr, bad.stderr
    finally:
        site.config.write_text(original)
    code, status = site.status()
    assert code == 0 and status["ready"] and (status["pid"], status["instance_id"]) == (st["pid"], st["instance_id"])


def test_start_against_an_address_held_by_another_program_says_it_is_not_cuzk(site: Site) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", int(site.tcp_addr.rpartition(":")[2])))
        held.listen()
        t0 = time.monotonic()
        refused = site.cli("daemon", "start", "--config", site.config, timeout=60)
        elapsed = time.monotonic() - t0
    assert refused.returncode == 2, refused.stderr
    assert f"cannot listen on {site.tcp_addr}: address in use by a program that is not a cuzk daemon" in refused.stderr
    assert "python" in refused.stderr  # the holder (this test process) is named by its command line
    assert elapsed < measure_cli_startup() + 2.0
    code, status = site.status()
    assert code == 3 and not status["running"] and not site.state.pid_path.exists()


# -- restart and stale state -----------------------------------------------------------------------------------------
def test_restart_with_a_changed_config_reports_the_new_fingerprint(site: Site) -> None:
    first = site.start()
    old = record(site)
    with site.client() as c:
        before = c.prove(job("before-restart"), timeout=120)
    assert_proof(before, site.root / "params")
    new_fp = site.write(memory={"total_budget": "2GiB"}, daemon={"shutdown_grace": "10s"})
    assert new_fp != first["config_fingerprint"]
    restarted = site.cli("daemon", "restart", "--config", site.config, "--json", "--wait-ready", str(READY_S),
                         timeout=READY_S + 120)
    assert restarted.returncode == 0, restarted.stderr
    out = json.loads(restarted.stdout)
    assert out["config_fingerprint"] == new_fp and out["ready"] and out["instance_id"] != first["instance_id"]
    assert out["previous"] == {"instance_id": first["instance_id"], "pid": first["pid"],
                               "config_fingerprint": first["config_fingerprint"]}
    assert "exited by itself after SIGTERM" in restarted.stderr and not old.process.alive
    site.reaper.watch(record(site).process)
    code, status = site.status()
    assert code == 0 and status["config_fingerprint"] == new_fp and status["instance_id"] == out["instance_id"]
    with site.client() as c:
        assert c.info().config_fingerprint == new_fp and c.status().memory_budget_bytes == 2 << 30
        again = c.await_proof("before-restart", 10_000)  # finished before the restart: still answerable
    assert again.status == Status.COMPLETED and again.proof == before.proof
    assert site.stop().returncode == 0


def test_a_stale_ready_log_line_does_not_make_start_return_early(site: Site) -> None:
    stale_id = "0123456789ab"
    site.state.ensure()
    ready_line = (f"2025-01-01 00:00:00,000 INFO instance={stale_id} cuzk.daemon: cuzk daemon ready, serving on "
                  f"{site.tcp_addr}\n")
    (site.state.logs_dir / f"29991231T235959Z-{stale_id}.log").write_text(ready_line)  # sorts after any real one
    (site.root / "daemon.log").write_text(ready_line)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead_pid = int(gone.stdout)
    site.state.pid_path.write_text(f"{dead_pid}\n")
    site.state.write_record(Identity(stale_id, "feedfacefeedface", str(site.config), dead_pid, 1, time.time() - 60,
                                     str(site.state_dir), str(site.state.logs_dir / "old.log"), [site.tcp_addr],
                                     phase="ready").record())
    # A startup that takes a while: the parameters of srs.preload are generated and loaded first.
    debug_params_path(site.root / "params", "mimc-4").unlink()
    site.write(srs={"preload": ["mimc-4"]})
    started = site.cli("daemon", "start", "--config", site.config, "--json", timeout=READY_S + 60)
    site.reaper.watch(record(site).process)
    assert started.returncode == 0, started.stderr
    st = json.loads(started.stdout)
    # Right when start returns, the daemon answering is the new instance, ready, its parameters hot.
    with site.client(timeout=5) as c:
        assert c.serving()
        info = c.info()
        assert info.ready and info.instance_id == st["instance_id"] != stale_id and info.pid == st["pid"]
        assert any(e.circuit_id == "mimc-4" and e.tier == pb.SRSStatus.HOT for e in c.status().loaded_srs)
    assert "stale pid file" in started.stderr and f"instance {stale_id}" in started.stderr
    shown = site.cli("daemon", "logs", "--config", site.config)
    assert f"instance {st['instance_id']}, running" in shown.stderr and f"instance={stale_id}" not in shown.stdout
    assert "took over a stale pid file" in shown.stdout and "cuzk daemon ready" in shown.stdout
    assert site.stop().returncode == 0


def test_a_pid_file_naming_a_reused_pid_is_detected_and_replaced(site: Site) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)  # not cuzk"])
    try:
        ticks = process_start_ticks(stranger.pid)
        assert ticks is not None

        def stage() -> None:
            site.state.ensure()
            site.state.pid_path.write_text(f"{stranger.pid}\n")
            site.state.write_record(Identity("00000000dead", "feedfacefeedface", str(site.config), stranger.pid,
                                             ticks - 1, time.time() - 3600, str(site.state_dir), "old.log",
                                             [site.tcp_addr], phase="ready").record())

        stage()
        code, status = site.status()
        assert code == 3 and not status["running"] and "now belongs to another program" in status["stale"]
        assert "not cuzk" in status["stale"]  # its command line is quoted
        stopped = site.stop()
        assert stopped.returncode == 0 and "nothing to stop" in stopped.stdout, stopped.stdout
        assert "removed the stale pid file" in stopped.stdout and stranger.poll() is None
        stage()
        st = site.start()
        assert st["pid"] != stranger.pid and stranger.poll() is None
        log = Path(st["log_path"]).read_text()
        assert "took over a stale pid file" in log and f"pid {stranger.pid} now belongs to another program" in log
        assert site.stop().returncode == 0 and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait(10)


# -- crash recovery ---------------------------------------------------------------------------------------------------
def test_kill_9_during_a_proof_then_start_requeues_or_fails_and_keeps_results(site: Site) -> None:
    params = site.root / "params"
    site.start()
    with site.client(timeout=None) as c:
        done = c.prove(job("done"), timeout=120)
        assert_proof(done, params)
        c.submit(job("in-flight", partitions=2, delay_ms=2500, seed=5))
        wait_in_flight(c)
    victim = record(site)
    site.reaper.watch(victim.process)
    victim.process.signal(signal.SIGKILL)
    wait_for(lambda: not victim.process.alive, 30, "the killed daemon to be gone")
    assert journal_state(site, "in-flight") == "accepted"

    code, status = site.status()
    assert code == 3 and not status["running"] and f"pid {victim.pid}" in status["stale"]
    second = site.start()  # requeue (the default)
    assert second["instance_id"] != victim.instance_id
    log = Path(second["log_path"]).read_text()
    assert "took over a stale pid file" in log and f"instance {victim.instance_id}" in log
    assert site.last_start is not None and "removed stale socket file" in site.last_start.stderr
    assert "1 re-queued, 0 failed" in log
    with site.client(timeout=None) as c:
        kept = c.await_proof("done", 10_000)
        assert kept.status == Status.COMPLETED and kept.proof == done.proof
        again = c.submit(job("done"))  # the same request_id still maps to the same job
        assert again.deduplicated and again.job_id == "done"
        assert_proof(c.await_proof("in-flight", 120_000, rpc_timeout=150), params, partitions=2, seed=5)
        # Now under "fail": another job in flight when the daemon is killed is answered FAILED, with the reason.
        c.submit(job("in-flight-2", partitions=2, delay_ms=2500, seed=7))
        wait_in_flight(c)
    victim = record(site)
    site.reaper.watch(victim.process)
    victim.process.signal(signal.SIGKILL)
    wait_for(lambda: not victim.process.alive, 30, "the killed daemon to be gone")
    site.write(daemon={"on_restart": "fail"})
    site.start()
    with site.client(timeout=None) as c:
        failed = c.await_proof("in-flight-2", 10_000)
        assert failed.status == Status.FAILED and 'daemon.on_restart = "fail"' in failed.error_message
        assert f"instance {victim.instance_id}" in failed.error_message
        assert c.await_proof("done", 10_000).proof == done.proof
        assert c.await_proof("in-flight", 10_000).status == Status.COMPLETED
    assert site.stop().returncode == 0


# -- signals and stop --------------------------------------------------------------------------------------------------
def test_sigterm_during_a_proof_lets_it_finish_and_exits_0(site: Site) -> None:
    proc = site.run_foreground()
    site.wait_ready(proc)
    results: list[pb.AwaitProofResponse] = []
    with site.client(timeout=None) as c:
        c.submit(job("graceful", partitions=2, delay_ms=1500, seed=3))
        waiter = threading.Thread(target=lambda: results.append(c.await_proof("graceful", rpc_timeout=120)))
        waiter.start()
        wait_in_flight(c)
        proc.send_signal(signal.SIGTERM)
        with site.client(timeout=5) as probe:
            wait_for(lambda: not probe.serving(), 10, "health NOT_SERVING")
            with pytest.raises(grpc.RpcError) as refused:
                probe.submit(job("too-late"))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        waiter.join(120)
    assert proc.wait(120) == 0, site.run_log()
    assert port_bindable(site.tcp_addr) and port_bindable(site.http_addr)
    assert not Path(site.unix_addr.removeprefix("unix://")).exists()
    assert results, "the waiter got no answer"
    assert_proof(results[0], site.root / "params", partitions=2, seed=3)
    last = site.state.read_last_exit()
    assert last is not None and (last["exit_code"], last["finished_in_grace"], last["cancelled"]) == (0, 1, 0)
    assert journal_state(site, "graceful") == "completed" and not site.state.pid_path.exists()


def test_sigterm_when_the_grace_runs_out_cancels_cleanly(site: Site) -> None:
    site.write(daemon={"shutdown_grace": "1s"})
    proc = site.run_foreground()
    site.wait_ready(proc)
    results: list[pb.AwaitProofResponse] = []
    with site.client(timeout=None) as c:
        c.submit(job("too-long", partitions=3, delay_ms=5000))
        waiter = threading.Thread(target=lambda: results.append(c.await_proof("too-long", rpc_timeout=120)))
        waiter.start()
        wait_in_flight(c)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        waiter.join(60)
    assert proc.wait(60) == 0, site.run_log()
    assert time.monotonic() - t0 < 20
    assert results and results[0].status == Status.CANCELLED and "shutting down" in results[0].error_message
    last = site.state.read_last_exit()
    assert last is not None and (last["exit_code"], last["cancelled"]) == (0, 1)
    assert journal_state(site, "too-long") == "cancelled" and port_bindable(site.tcp_addr)


def test_ctrl_c_drains_and_a_second_one_aborts_at_once(site: Site) -> None:
    proc = site.run_foreground()
    site.wait_ready(proc)
    daemon = ProcessRef(proc.pid, process_start_ticks(proc.pid) or 0)
    workers = daemon.children()
    site.reaper.watch(daemon)
    results: list[pb.AwaitProofResponse] = []
    with site.client(timeout=None) as c:
        c.submit(job("survivor", partitions=2, delay_ms=1500, seed=11))
        c.submit(job("interrupted", partitions=3, delay_ms=5000))
        waiter = threading.Thread(target=lambda: results.append(c.await_proof("survivor", rpc_timeout=120)))
        waiter.start()
        wait_in_flight(c)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the whole process group gets it
        wait_for(lambda: not c.serving(), 10, "the drain to begin")
        # The daemon drains; its worker processes ignored the Ctrl-C and finish the job in flight.
        waiter.join(120)
        assert results, "no answer for the job in flight"
        assert_proof(results[0], site.root / "params", partitions=2, seed=11)
        assert all(w.alive for w in workers) and len(workers) >= 2
        wait_for(lambda: any(q.in_progress for q in c.status().queues), 30, "the next job in flight")
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(30) == 130
    assert time.monotonic() - t0 < 5
    assert journal_state(site, "interrupted") == "accepted"  # the next start re-queues it
    assert "second signal (SIGINT): aborting at once" in site.run_log()


def test_daemon_stop_during_a_proof_returns_once_the_port_is_free(site: Site) -> None:
    site.start()
    with site.client(timeout=None) as c:
        c.submit(job("finishing", partitions=2, delay_ms=1500, seed=9))
        wait_in_flight(c)
    ident = record(site)
    stopped = site.stop()
    # Right after `stop` returns: the process is gone and every address is free.
    assert not ident.process.alive
    assert port_bindable(site.tcp_addr) and port_bindable(site.http_addr)
    assert not Path(site.unix_addr.removeprefix("unix://")).exists()
    assert stopped.returncode == 0, stopped.stderr
    assert "exited by itself after SIGTERM" in stopped.stdout and "exit status 0" in stopped.stdout
    assert "1 finished within the 30 s grace, 0 cancelled" in stopped.stdout, stopped.stdout
    assert journal_state(site, "finishing") == "completed"
    code, status = site.status()
    assert code == 3 and not status["running"] and status["stale"] is None


def test_daemon_stop_escalates_to_sigkill_after_its_timeout(site: Site) -> None:
    site.start()
    with site.client(timeout=None) as c:
        c.submit(job("stuck", partitions=3, delay_ms=5000))
        wait_in_flight(c)
    ident = record(site)
    site.reaper.watch(ident.process)
    stopped = site.cli("daemon", "stop", "--config", site.config, "--timeout", "1", "--json")
    assert stopped.returncode == 0, stopped.stderr
    out = json.loads(stopped.stdout)
    assert out["how"] == "SIGKILL" and out["instance_id"] == ident.instance_id
    assert "sending SIGKILL" in stopped.stderr and "killed with SIGKILL" in stopped.stderr
    assert not ident.process.alive and port_bindable(site.tcp_addr) and port_bindable(site.http_addr)
    assert not Path(site.unix_addr.removeprefix("unix://")).exists()  # probed, then removed
    code, status = site.status()
    assert code == 3 and status["stale"] is None and not site.state.pid_path.exists()
    assert journal_state(site, "stuck") == "accepted"


def test_systemd_notify_ready_only_when_serving_and_stopping_on_sigterm(site: Site, tmp_path: Path) -> None:
    import socket

    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as rx:
        rx.bind(str(path))
        rx.settimeout(READY_S)
        proc = site.run_foreground(env={"NOTIFY_SOCKET": str(path)})
        messages = []
        while True:
            fields = dict(line.split("=", 1) for line in rx.recv(4096).decode().splitlines())
            messages.append(fields)
            if fields.get("READY") == "1":
                break
        # At the moment READY=1 arrives, the daemon answers as ready.
        with site.client(timeout=5) as c:
            assert c.serving()
            info = c.info()
            assert info.ready and info.pid == proc.pid
        assert fields["MAINPID"] == str(proc.pid) and info.instance_id in fields["STATUS"]
        proc.send_signal(signal.SIGTERM)
        rx.settimeout(30)
        stopping = dict(line.split("=", 1) for line in rx.recv(4096).decode().splitlines())
    assert stopping.get("STOPPING") == "1"
    assert proc.wait(60) == 0, site.run_log()
