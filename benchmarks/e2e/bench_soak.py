"""Soak: a daemon under a mixed stream for a set time, with faults injected at random times from a seed,
its processes and files sampled, and verdicts on what it answered and what it left. The daemon proves on
the CPU backend, with --backend cuda on the host's GPUs, with --emulate SIZE on an emulated CUDA card of
that size (docs/gpu.md, "The emulated device": the CUDA backend's code on the host, slow: its stream is
then the test circuits alone unless --kinds names more).

The stream, as Curio sends it: WinningPoSt-2KiB every ~25 s (CRITICAL, 30 s deadline), WindowPoSt-2KiB
every ~40 s (HIGH, 30 min), with --kinds naming them PoRep-2KiB every ~5 min and SnapDeals-2KiB every
~10 min (NORMAL, no deadline), and closed-loop clients proving test circuits of several partitions
(LOW/NORMAL, and HIGH with a deadline). Request ids are deterministic (`soak<seed>-<kind>-<n>`);
half the requests start with Prove, the others with SubmitProof + AwaitProof, and every retry (an
RPC error, a daemon gone, a FAILED answer: at most --job-retries of those) sends the same id again
with SubmitProof, as Curio does.

Faults, one at a time, their times and order drawn from --seed (each kind once before any repeats):
  kill-synth     SIGKILL a synthesis process (a busy one if any; pids from the daemon's /status)
  kill-device    SIGKILL a device process
  kill-daemon    SIGKILL the daemon; start it again (clients retry the same ids)
  sigterm        SIGTERM (drain for daemon.shutdown_grace), then start it again
  disconnect     a Prove whose client goes away after 1 s; the id is then retried like any other
  disk-full      the state directory's file system filled for a few seconds (a tmpfs the run mounts;
                 left out where mounting is not allowed)
  corrupt-param  a truncated or garbled parameter file in the cache, a request for its circuit (it must
                 fail naming the file), then the good file back and the same id again
  ray-node       with --ray-nodes 2 or more (the daemon on the Ray executor, its nodes on this host): a node
                 other than the head removed (one whose device is proving, if any) and a new one added; the
                 daemon must mark the old node's device lost and prove on the new one's

Every --interval seconds: RSS and USS of the daemon and of its process tree, open fds, threads, child
processes, /dev/shm segments of the run's daemons (`cuzk_<daemon pid>_*`) and their bytes, journal and log
bytes, the memory budget's reserved bytes (/status); on CUDA each device's memory as its process reads it
(/status devices[]: the pool's bytes in use and held, the driver's used bytes); with Ray, RSS and USS of
the cluster's processes. The record (JSON: hardware, date, commit, backend) and a PNG of each series
with the faults marked go to --out. Verdicts (exit 1 if any fails):
  answered        every id answered once: COMPLETED, or FAILED with a reason; none lost
  agreed          at the end the daemon (its journal) gives every id the answer its client got, the
                  same proof bytes (Groth16 proofs are randomized: a second proof of an id would differ)
  verified        every proof checks with the independent py_ecc verifier (cuzk.groth16.reference_verifier)
  deadlines       per priority, deadlines missed (with --gate-deadlines, CRITICAL misses outside a daemon
                  restart fail)
  growth          per series, the least-squares slope after warm-up (samples within --restart-warmup
                  of a daemon start left out, for a device's memory also of a device process killed)
                  times the window, within the series' bound
  status          every daemon instance answered /status once past --restart-warmup (the samples of
                  the budget and device memory, and the faults that find a process through it, need it)
  leftovers       after the last stop: no process of any instance alive, no segment made during the run,
                  no shared pinned copy held by one of its processes; on an emulated card nothing held
                  in the card's room (--root/emulated-gpus) and no room of its processes elsewhere
  output          the daemons' stdout and stderr hold no failure of logging itself ("--- Logging error
                  ---", a traceback per record a handler could not write); other tracebacks are counted

    python benchmarks/e2e/bench_soak.py --duration 180 --seed 1 --root /tmp/soak
    python benchmarks/e2e/bench_soak.py --duration 120 --emulate 4GiB --root /tmp/soak-emulated
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the e2e steps
from _common import RESULTS, git_revision, hardware, still_running

FAULTS = ("kill-synth", "kill-device", "kill-daemon", "sigterm", "disconnect", "disk-full", "corrupt-param",
          "ray-node")
#: Test circuits of the closed-loop clients: (circuit, partitions, priority, deadline seconds or None, payload
#: extras). The delays keep the processes busy for a while, so that a kill often finds one at work.
TEST_MIX = (("mimc-3", 3, "normal", None, {"synth_delay_ms": 400}), ("mimc-4", 2, "low", None, {}),
            ("bits-1", 2, "high", 120.0, {"device_delay_ms": 300}))
CORRUPT_CIRCUIT = "mimc-5"  # proven only by the corrupt-param fault
#: Curio's periodic kinds: (kind, period s, priority, deadline s).
CHAIN = (("winning", 25.0, "critical", 30.0), ("wpost", 40.0, "high", 1800.0), ("porep", 300.0, "normal", None),
         ("snap", 600.0, "normal", None))
RETRY_CODES = ("UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN", "NOT_FOUND")
MIB = 1 << 20
#: A device's memory as its process reads it (/status devices[]), sampled per device as "<series>:<label>".
DEVICE_SERIES = {"cuda_pool_used": "memory_pool_used", "cuda_pool_held": "memory_pool_held",
                 "cuda_driver_used": "memory_driver_used"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the daemon ------------------------------------------------------------------------------------------

class Daemon:
    """`cuzk daemon run` in the foreground, restarted as often as the faults ask; every pid it or its
    children ever had is remembered, so that the end can check none is left."""

    def __init__(self, root: Path, params: Path, state: Path, *, grace: float, retention: float, budget: str = "4GiB",
                 backend: str = "cpu", emulate: str | None = None, ray_address: str | None = None) -> None:
        from cuzk.backends.cuda.runtime import EMULATED_ROOM_ENV
        from cuzk.config import config_from_dict

        self.root, self.state = root, state
        #: Every instance's stdout and stderr, appended; this run's part starts at `output_from`.
        self.output = root / "daemon-stdout.log"
        self.output_from = self.output.stat().st_size if self.output.exists() else 0
        gpus: dict[str, Any] = {"gpu_workers_per_device": 1, "backend": backend}
        self.env = {"PYTHONUNBUFFERED": "1"}
        #: The emulated cards' room, the run's own: every instance's device processes share the card
        #: through it, and a daemon killed by SIGKILL leaves no room of its own in the temporary directory.
        self.room: Path | None = None
        if emulate is not None:
            gpus["emulate"] = [emulate]
            self.room = root / "emulated-gpus"
            shutil.rmtree(self.room, ignore_errors=True)
            self.room.mkdir()
            self.env[EMULATED_ROOM_ENV] = str(self.room)
        self.unix_addr = f"unix://{root / 'cuzk.sock'}"
        self.http_addr = f"127.0.0.1:{free_port()}"
        data = {"daemon": {"listen": [self.unix_addr], "status_listen": self.http_addr, "state_dir": str(state),
                           "shutdown_grace": f"{grace:g}s", "on_restart": "requeue",
                           # The `agreed` verdict asks the journal for every id at the end: none may have aged out.
                           "result_retention": f"{retention:g}s"},
                "srs": {"param_cache": str(params)},
                "memory": {"total_budget": budget, "eviction_min_idle": "0s"},
                "pipeline": {"max_parallel_synthesis": 1},
                "gpus": gpus,
                "debug": {"test_circuits": True}}
        if ray_address is not None:
            data["executor"] = {"kind": "ray", "address": ray_address}
        self.config = root / "cuzk.toml"
        self.config.write_text(config_from_dict(data).to_toml())
        self.proc: subprocess.Popen | None = None
        self.starts: list[float] = []
        self.pids: list[int] = []  # of every instance started
        self.seen: dict[int, float] = {}  # pid -> create time, of the daemon and every descendant
        self.lock = threading.Lock()

    def start(self, clock: Callable[[], float], ready_timeout: float = 600.0) -> float:
        from cuzk.server.client import CuzkClient

        env = {**os.environ, **self.env}
        began = time.monotonic()
        with open(self.output, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config",
                                     str(self.config)], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, cwd=self.root)
        with self.lock:
            self.proc = proc
            self.starts.append(clock())
            self.pids.append(proc.pid)
        with CuzkClient(self.unix_addr, timeout=2) as client:
            client.wait_ready(ready_timeout, alive=lambda: proc.poll() is None)
        return time.monotonic() - began

    @property
    def pid(self) -> int | None:
        with self.lock:
            return None if self.proc is None or self.proc.poll() is not None else self.proc.pid

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{self.http_addr}/status", timeout=10) as r:
            return json.loads(r.read())

    def tree(self) -> list[Any]:
        """psutil processes of the daemon and its descendants (remembered for the leftovers check)."""
        import psutil

        pid = self.pid
        if pid is None:
            return []
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                self.seen.setdefault(p.pid, p.create_time())
        return procs

    def signal(self, sig: int) -> None:
        with self.lock:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int | None:
        with self.lock:
            proc = self.proc
        if proc is None:
            return None
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def output_findings(self) -> dict[str, Any]:
        """What this run's daemons wrote that no operator should have to read past: logging's own
        failures ("--- Logging error ---", a traceback per record a handler could not write) are
        judged; other tracebacks are counted, with the first one's last line."""
        with open(self.output, "rb") as f:
            f.seek(self.output_from)
            text = f.read().decode("utf-8", "replace")
        lines = text.splitlines()
        starts = [k for k, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
        first = ""
        if starts:
            first = next((line for line in lines[starts[0] + 1:] if line and not line.startswith((" ", "\t"))), "")
        return {"logging_errors": text.count("--- Logging error ---"), "tracebacks": len(starts),
                "first_traceback_ends": first[:300]}

    def leftovers(self) -> list[dict[str, Any]]:
        """Processes of any instance still alive (same pid and create time as when seen)."""
        return still_running(self.seen)

    def held_elsewhere(self) -> list[str]:
        """What the run's processes left outside the run's directory (after the last stop): shared
        pinned copies they still hold (`cuzk.backends.cuda.shared_pinned`), and emulated cards' rooms
        in the temporary directory holding a file of theirs (a daemon's own room, left by a kill)."""
        from cuzk.backends.cuda import shared_pinned

        def ours(f: Path) -> bool:  # named by a pid of the run's, and written by that process (pids recycle)
            with contextlib.suppress(ValueError, OSError):
                created = self.seen.get(int(f.name))
                return created is not None and f.stat().st_mtime >= created - 1.0
            return False

        candidates = [*shared_pinned.root().glob("*/holders/*"),
                      *Path(tempfile.gettempdir()).glob("cuzk-emulated-gpus-*/card*/*")]
        return [str(f) for f in candidates if ours(f)]

    def room_held(self) -> list[str]:
        """Holdings in the emulated card's room of processes still alive (a dead one's file holds nothing)."""
        from cuzk.backends.cuda.emulated.device import holdings

        if self.room is None:
            return []
        return [f"{card.name}: pid {pid} holds {n} bytes" for card in sorted(self.room.glob("card*"))
                for pid, n in holdings(card).items() if n]


# -- requests and clients ------------------------------------------------------------------------------

@dataclass
class Request:
    rid: str
    kind: str  # a test circuit id, or winning / wpost
    priority: str
    deadline_s: float | None
    partitions: int = 1
    seed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    first_submit: float = 0.0
    answered: float = 0.0
    status: str = "LOST"
    error: str = ""
    proof: bytes = b""
    attempts: int = 0
    rpc_errors: list[str] = field(default_factory=list)
    fresh_accepts: int = 0
    failures_seen: list[str] = field(default_factory=list)
    origin: str = "stream"
    expect_failure: bool = False
    verified: bool | None = None


class Stream:
    """Builds each request's SubmitProofRequest and runs it to its final answer, Curio-style."""

    def __init__(self, daemon: Daemon, inputs: dict[str, Any], *, job_retries: int, give_up_at: Callable[[], float],
                 clock: Callable[[], float]) -> None:
        self.daemon, self.inputs = daemon, inputs
        self.job_retries, self.give_up_at, self.clock = job_retries, give_up_at, clock
        self.requests: dict[str, Request] = {}
        self.lock = threading.Lock()
        #: Called with each request once it has its final answer.
        self.on_answer: Callable[[Request], None] = lambda req: None

    def submit_message(self, req: Request) -> Any:
        from cuzk.server.client import build_submit, payload_for_test_circuit

        if req.kind in self.inputs:
            return self.inputs[req.kind].submit_request(priority=req.priority, request_id=req.rid)
        return build_submit("test", request_id=req.rid, priority=req.priority, vanilla_proof=payload_for_test_circuit(
            req.kind, partitions=req.partitions, seed=req.seed, **req.extra))

    def run(self, req: Request, *, prove_first: bool, prove_timeout: float | None = None) -> Request:
        import grpc

        from cuzk.server._gen import proving_pb2 as pb
        from cuzk.server.client import CuzkClient

        with self.lock:
            self.requests[req.rid] = req
        message = self.submit_message(req)
        req.first_submit = self.clock()
        use_prove = prove_first
        with CuzkClient(self.daemon.unix_addr, timeout=30) as client:
            while True:
                req.attempts += 1
                try:
                    if use_prove:
                        reply = client.prove(message, timeout=prove_timeout)
                    else:
                        sub = client.submit(message)
                        req.fresh_accepts += 0 if sub.deduplicated else 1
                        reply = client.await_proof(sub.job_id, 0, rpc_timeout=None)
                except grpc.RpcError as err:
                    code = err.code().name if err.code() is not None else "UNKNOWN"
                    req.rpc_errors.append(f"{code}: {err.details()}"[:300])
                    use_prove = False
                    if code not in RETRY_CODES:
                        req.status, req.error = "FAILED", f"refused: {code}: {err.details()}"
                        break
                    if time.monotonic() > self.give_up_at():
                        req.error = f"no answer before the soak gave up; last error {code}: {err.details()}"
                        break
                    time.sleep(min(5.0, 0.25 * 2 ** min(req.attempts, 5)) * random.uniform(0.5, 1.0))
                    continue
                use_prove = False
                status = pb.AwaitProofResponse.Status.Name(reply.status)
                if status == "COMPLETED":
                    req.status, req.error, req.proof = status, "", reply.proof
                    break
                if status in ("FAILED", "CANCELLED"):
                    req.failures_seen.append(f"{status}: {reply.error_message}"[:300])
                    if len(req.failures_seen) > self.job_retries or time.monotonic() > self.give_up_at():
                        req.status, req.error = status, reply.error_message
                        break
                    continue  # Curio retries the task with the same id
                # TIMEOUT or an empty reply (the daemon went away mid-call): ask again
        req.answered = self.clock()
        self.on_answer(req)
        return req


# -- sampling --------------------------------------------------------------------------------------------

SERIES = ("daemon_rss", "daemon_uss", "tree_rss", "tree_uss", "tree_fds", "tree_threads", "children",
          "shm_segments", "shm_bytes", "journal_bytes", "log_bytes", "budget_reserved", "ray_rss", "ray_uss")


def shm_segments(daemon_pids: list[int]) -> tuple[int, int, list[str]]:
    """Shared-memory segments of the daemons this run started (cuzk_<daemon pid>_...): count, bytes, names."""
    prefixes = tuple(f"cuzk_{pid}_" for pid in daemon_pids)
    names, total = [], 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir("/dev/shm"):
            if entry.name.startswith(prefixes):
                with contextlib.suppress(FileNotFoundError):
                    total += entry.stat().st_blocks * 512
                    names.append(entry.name)
    return len(names), total, names


def dir_bytes(path: Path, pattern: str) -> int:
    total = 0
    for p in path.glob(pattern):
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size
    return total


def sample(daemon: Daemon, t: float, ray_nodes: Any = None) -> dict[str, Any]:
    import psutil

    procs = daemon.tree()
    row: dict[str, Any] = {"t": round(t, 2), "pid": daemon.pid}
    if procs:
        values = []
        for p in procs:
            with contextlib.suppress(psutil.Error):
                m = p.memory_full_info()
                values.append((m.rss, m.uss, p.num_fds(), p.num_threads()))
        if values:
            row.update(daemon_rss=values[0][0], daemon_uss=values[0][1], tree_rss=sum(v[0] for v in values),
                       tree_uss=sum(v[1] for v in values), tree_fds=sum(v[2] for v in values),
                       tree_threads=sum(v[3] for v in values), children=len(procs) - 1)
    row["shm_segments"], row["shm_bytes"], _ = shm_segments(daemon.pids)
    row["journal_bytes"] = dir_bytes(daemon.state, "journal.sqlite3*")
    row["log_bytes"] = dir_bytes(daemon.state, "**/*.log")
    try:
        status = daemon.status()
    except (OSError, ValueError) as err:  # the `status` verdict judges whether each daemon answered
        row["status_error"] = f"{type(err).__name__}: {err}"
        row["status_listeners"] = listeners(procs)  # whether anything of the daemon's listens, and where
    else:
        with contextlib.suppress(KeyError):
            row["budget_reserved"] = status["memory"]["used_bytes"]
            row["journal_writable"] = (status.get("journal") or {}).get("writable")
            row["pipeline_segments"] = status["buffers"]["shared_segments"]
            for d in status["devices"]:  # absent on a CPU (null there)
                for name, key in DEVICE_SERIES.items():
                    if d.get(key) is not None:
                        row[f"{name}:{d['label']}"] = d[key]
    if ray_nodes is not None:
        rss = uss = 0
        for p in ray_nodes.processes():
            with contextlib.suppress(psutil.Error):
                m = p.memory_full_info()
                rss, uss = rss + m.rss, uss + m.uss
        row.update(ray_rss=rss, ray_uss=uss)
    return row


def listeners(procs: list[Any]) -> list[str]:
    """"pid host:port" of each TCP socket the daemon's processes listen on."""
    import psutil

    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            out += [f"{p.pid} {c.laddr.ip}:{c.laddr.port}" for c in p.net_connections(kind="tcp")
                    if c.status == psutil.CONN_LISTEN]
    return out


def status_gaps(samples: list[dict[str, Any]], starts: list[float], warmup: float) -> list[dict[str, Any]]:
    """The daemon instances (by start time) whose /status never answered once they were past
    `warmup`, with how often it was asked and the last error: the samples and faults that read it
    then have nothing to go on."""
    gaps = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else float("inf")
        asked = [r for r in samples if start + warmup <= r["t"] < end and r.get("pid") is not None]
        if asked and not any("budget_reserved" in r for r in asked):
            last = next((r for r in reversed(asked) if "status_error" in r), {})
            gaps.append({"start": round(start, 1), "samples": len(asked), "error": last.get("status_error", ""),
                         "listening": last.get("status_listeners", [])})
    return gaps


def device_series(samples: list[dict[str, Any]]) -> list[str]:
    """The per-device series the samples hold ("cuda_pool_used:cuda0", ...), in a stable order."""
    names = {k for s in samples for k in s if k.split(":")[0] in DEVICE_SERIES}
    return sorted(names, key=lambda n: (list(DEVICE_SERIES).index(n.split(":")[0]), n))


def growth(samples: list[dict[str, Any]], name: str, *, start: float, skip: list[tuple[float, float]]) -> dict | None:
    """Least-squares slope of a series after `start`, samples inside `skip` windows left out."""
    import numpy as np

    pts = [(s["t"], s[name]) for s in samples if name in s and s["t"] >= start
           and not any(a <= s["t"] < b for a, b in skip)]
    if len(pts) < 5:
        return None
    t, y = np.array(pts, dtype=float).T
    slope = float(np.polyfit(t, y, 1)[0])
    return {"slope_per_s": slope, "window_s": float(t[-1] - t[0]), "growth": slope * float(t[-1] - t[0]),
            "median": float(np.median(y)), "samples": len(pts)}


def bound(name: str, median: float, answered: int) -> float:
    """The growth over the window a series may show without being called a leak."""
    if name in ("daemon_rss", "daemon_uss", "tree_rss", "tree_uss", "budget_reserved", "ray_rss", "ray_uss"):
        return 64 * MIB + 0.10 * median
    if name == "tree_fds":
        return 16 + 0.10 * median
    if name == "tree_threads":
        # The gRPC server's pool keeps the threads of its busiest moment (at most daemon.rpc_threads):
        # a restart met by a burst of client retries sets a higher plateau, not a leak.
        return 32 + 0.10 * median
    if name == "children":
        return 1.0
    if name == "shm_segments":
        return 4.0
    if name == "shm_bytes":
        return 64 * MIB
    if name == "journal_bytes":
        return 16 * MIB
    if name.split(":")[0] in DEVICE_SERIES:
        # The pool keeps the blocks of its largest proof for reuse: a plateau once each kind has been
        # proven; a leak (lotus #13634: blocks freed but never reused) grows with every proof.
        return 16 * MIB + 0.10 * median
    return 1 * MIB + 8192 * answered  # log_bytes: the daemon logs each job: bounded per job


# -- faults ---------------------------------------------------------------------------------------------

class Faults:
    def __init__(self, daemon: Daemon, stream: Stream, params: Path, state_mounted: bool, clock: Callable[[], float],
                 rng: random.Random, seed: int, ray_nodes: Any = None) -> None:
        self.daemon, self.stream, self.params, self.ray_nodes = daemon, stream, params, ray_nodes
        self.state_mounted, self.clock, self.rng, self.seed = state_mounted, clock, rng, seed
        self.log: list[dict[str, Any]] = []
        self.down: list[tuple[float, float]] = []  # (from, to): the daemon was not serving
        self.helpers: list[threading.Thread] = []
        self.n = 0

    def inject(self, kind: str) -> dict[str, Any]:
        start = self.clock()
        entry: dict[str, Any] = {"t": round(start, 2), "fault": kind}
        try:
            entry.update(getattr(self, "_" + kind.replace("-", "_"))())
        except Exception as err:  # recorded: a fault that could not be injected is a finding too
            entry["error"] = f"{type(err).__name__}: {err}"
        entry["seconds"] = round(self.clock() - start, 2)
        self.log.append(entry)
        print(f"[{start:7.1f}s] fault {kind}: {json.dumps({k: v for k, v in entry.items() if k != 't'})}",
              flush=True)
        return entry

    def _worker_pid(self, section: str) -> tuple[int, str]:
        status = self.daemon.status()
        if section == "synthesis":
            give_up = time.monotonic() + 10.0
            while True:  # a busy one if one gets busy within 10 s: a kill mid-synthesis is the harder case
                workers = [w for w in status["synthesis"]["workers"] if not w.get("reserved_for")]
                busy = [w for w in workers if w["state"] != "idle"]
                if busy or time.monotonic() > give_up:
                    break
                time.sleep(0.1)
                status = self.daemon.status()
            w = self.rng.choice(busy or workers)
            return int(w["pid"]), f"{w['worker_id']} ({w['state']}, job {w['current_job']})"
        d = self.rng.choice([d for d in status["devices"] if d.get("state", "ready") == "ready" and d["pid"]])
        return int(d["pid"]), d.get("worker", d["label"])

    def _kill_child(self, section: str) -> dict[str, Any]:
        import psutil

        pid, what = self._worker_pid(section)
        daemon_pid = self.daemon.pid
        ours = set() if daemon_pid is None else {p.pid for p in psutil.Process(daemon_pid).children(recursive=True)}
        if section == "device" and self.ray_nodes is not None:  # an actor: a process of the cluster's
            ours = {p.pid for p in self.ray_nodes.processes()}
        if pid not in ours:
            raise RuntimeError(f"pid {pid} ({what}) is not a process of the daemon {daemon_pid} or its cluster")
        os.kill(pid, signal.SIGKILL)
        return {"pid": pid, "what": what}

    def _kill_synth(self) -> dict[str, Any]:
        daemon_pid = self.daemon.pid
        out = self._kill_child("synthesis")
        # Its segments: handed over (the daemon holds them until their partitions are proven) or one it
        # was filling, which the daemon must remove. Any still there once the daemon is idle is an orphan.
        time.sleep(2.0)
        prefix = f"cuzk_{daemon_pid}_{out['pid']}_"
        with contextlib.suppress(OSError):
            out["segments_of_the_dead"] = [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]
        return out

    def _kill_device(self) -> dict[str, Any]:
        return self._kill_child("device")

    def _restart(self, sig: int, wait_s: float) -> dict[str, Any]:
        pid, down = self.daemon.pid, self.clock()
        self.daemon.tree()  # remember its children before they go
        self.daemon.signal(sig)
        code = self.daemon.wait(wait_s)
        if code is None:
            self.daemon.signal(signal.SIGKILL)
            code = self.daemon.wait(30)
        ready_s = self.daemon.start(self.clock)
        self.down.append((down, self.clock()))
        return {"pid": pid, "exit": code, "restart_ready_s": round(ready_s, 1), "new_pid": self.daemon.pid}

    def _kill_daemon(self) -> dict[str, Any]:
        return self._restart(signal.SIGKILL, 10)

    def _sigterm(self) -> dict[str, Any]:
        return self._restart(signal.SIGTERM, 120)

    def _disconnect(self) -> dict[str, Any]:
        self.n += 1
        req = Request(f"soak{self.seed}-disconnect-{self.n}", "mimc-3", "normal", None, partitions=2,
                      seed=10_000 + 16 * self.n, extra={"synth_delay_ms": 2000}, origin="disconnect")
        t = threading.Thread(target=self.stream.run, args=(req,), kwargs={"prove_first": True, "prove_timeout": 1.0},
                             daemon=True)
        t.start()
        self.helpers.append(t)
        return {"request_id": req.rid}

    def _disk_full(self) -> dict[str, Any]:
        if not self.state_mounted:
            return {"skipped": "the state directory is not a tmpfs this run could mount"}
        ballast = self.daemon.state / "ballast"
        try:
            with open(ballast, "wb", buffering=0) as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)
            time.sleep(6.0)
            seen = self.daemon.status().get("journal") or {}
        finally:
            ballast.unlink()
        return {"held_s": 6.0, "journal_during": seen}

    def _corrupt_param(self) -> dict[str, Any]:
        from cuzk.providers.debug import debug_params_path

        path = debug_params_path(self.params, CORRUPT_CIRCUIT)
        good = path.with_name(path.name + ".good")
        shutil.copy(path, good)
        data = good.read_bytes()
        how = self.rng.choice(("truncated", "garbled"))
        try:  # the good file back however the fault ends: a run stopped here left it broken for the next
            if how == "truncated":
                path.write_bytes(data[: len(data) // 2])
            else:
                mid = len(data) // 3
                path.write_bytes(data[:mid] + os.urandom(4096) + data[mid + 4096:])
            with contextlib.suppress(OSError, KeyError, urllib.error.URLError):
                self._evict(CORRUPT_CIRCUIT)
            self.n += 1
            req = Request(f"soak{self.seed}-corrupt-{self.n}", CORRUPT_CIRCUIT, "normal", None, partitions=1,
                          seed=20_000 + self.n, origin="corrupt-param", expect_failure=True)
            stream = Stream(self.daemon, self.stream.inputs, job_retries=0, give_up_at=self.stream.give_up_at,
                            clock=self.clock)
            stream.on_answer = self.stream.on_answer
            stream.run(req, prove_first=True)
        finally:
            shutil.move(good, path)
        with self.stream.lock:
            self.stream.requests[req.rid] = req
        self.n += 1
        after = Request(f"soak{self.seed}-corrupt-{self.n}", CORRUPT_CIRCUIT, "normal", None, partitions=1,
                        seed=20_000 + self.n, origin="corrupt-param-restored")
        self.stream.run(after, prove_first=True)
        return {"how": how, "file": str(path), "answer": req.status, "answer_error": req.error[:300],
                "names_the_file": path.name in req.error, "after_restore": after.status}

    def _ray_node(self) -> dict[str, Any]:
        if self.ray_nodes is None:
            return {"skipped": "the daemon runs the local executor (--ray-nodes 0)"}
        return self.ray_nodes.replace_node(self.daemon.status, self.rng, on_ready=self._spread_load)

    def _spread_load(self) -> str:
        """A job of more partitions than the devices, each holding its device a while, so that the node
        that joined gets work whatever the stream is doing (it may have ended)."""
        self.n += 1
        req = Request(f"soak{self.seed}-ray-node-{self.n}", "mimc-3", "normal", None, partitions=6,
                      seed=30_000 + 16 * self.n, extra={"device_delay_ms": 1500}, origin="ray-node")
        t = threading.Thread(target=self.stream.run, args=(req,), kwargs={"prove_first": False}, daemon=True)
        t.start()
        self.helpers.append(t)
        return req.rid

    def _evict(self, circuit: str) -> None:
        from cuzk.server.client import CuzkClient

        with CuzkClient(self.daemon.unix_addr, timeout=10) as client, contextlib.suppress(Exception):
            client.evict(circuit)


# -- the run ---------------------------------------------------------------------------------------------

def prepare(root: Path, kinds: list[str]) -> tuple[Path, dict[str, Any], dict[str, dict]]:
    """Test-circuit parameters and, per Filecoin kind, key and vanilla proofs (bench_porep_e2e.py
    --stop-after vanilla, kept on --root); the inputs and public values per kind."""
    from cuzk.bench.inputs import ProofInputs, from_gen_vanilla
    from cuzk.providers.debug import debug_params_path, generate_debug_params

    params = root / "params"
    params.mkdir(parents=True, exist_ok=True)
    for circuit in {m[0] for m in TEST_MIX} | {CORRUPT_CIRCUIT}:
        path = debug_params_path(params, circuit)
        good = path.with_name(path.name + ".good")
        if good.exists():  # a run stopped mid corrupt-param: its fault's copy of the good file
            shutil.move(good, path)
        if not path.with_suffix(".vk").exists():
            generate_debug_params(circuit, str(path))
    inputs, public = {}, {}
    script = Path(__file__).resolve().parent / "bench_porep_e2e.py"
    for kind in kinds:
        vanilla = root / f"vanilla-{kind}"
        if not (vanilla / "public.json").exists():
            subprocess.run([sys.executable, str(script), "--kind", kind, "--sector-size", "2KiB", "--backend", "cpu",
                            "--root", str(root), "--stop-after", "vanilla", "--out", str(root / "prep")], check=True)
        inputs[kind] = from_gen_vanilla(vanilla, ProofInputs(kind))
        public[kind] = json.loads((vanilla / "public.json").read_text())
    return params, inputs, public


def verify(req: Request, params: Path, public: dict[str, dict]) -> bool:
    from cuzk.groth16 import reference_verifier
    from cuzk.providers.debug import debug_params_path, debug_public_inputs

    if req.kind in public:
        from bench_porep_e2e import _verify

        from cuzk.filecoin.sizes import CircuitKind, parameter_file_name, sector_params

        vk = params / parameter_file_name(CircuitKind(req.kind), sector_params("2KiB"), "vk")
        return bool(_verify(req.kind, req.proof, public[req.kind], vk)["all_verified"])
    vk_bytes = debug_params_path(params, req.kind).with_suffix(".vk").read_bytes()
    if len(req.proof) != 192 * req.partitions:
        return False
    return all(reference_verifier.verify(vk_bytes, req.proof[192 * k:192 * (k + 1)],
                                         debug_public_inputs(req.kind, req.seed + k)) for k in range(req.partitions))


def mount_state(state: Path, size: str) -> bool:
    state.mkdir(parents=True, exist_ok=True)
    if os.path.ismount(state):
        subprocess.run(["umount", "-l", str(state)], check=False)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(state)],
                          capture_output=True, check=False).returncode == 0


def plot(path: Path, samples: list[dict[str, Any]], faults: list[dict[str, Any]], warmup: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = dict(zip(FAULTS, ("tab:red", "tab:orange", "black", "tab:purple", "tab:green", "tab:brown",
                               "tab:pink", "tab:cyan"), strict=True))
    devices = device_series(samples)
    panels: list[tuple[str, list[str]]] = [(name, [name]) for name in SERIES if any(name in s for s in samples)]
    panels += [(kind, [n for n in devices if n.split(":")[0] == kind]) for kind in DEVICE_SERIES
               if any(n.split(":")[0] == kind for n in devices)]  # one line per device
    rows = max(1, -(-len(panels) // 3))
    fig, axes = plt.subplots(rows, 3, figsize=(16, 3.25 * rows), sharex=True, squeeze=False)
    scale = {n: (MIB, "MiB") for n in ("daemon_rss", "daemon_uss", "tree_rss", "tree_uss", "shm_bytes",
                                       "journal_bytes", "log_bytes", "budget_reserved", "ray_rss", "ray_uss",
                                       *DEVICE_SERIES)}
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (head, names) in zip(axes.flat, panels, strict=False):
        div, unit = scale.get(head, (1, ""))
        for name in names:
            pts = [(s["t"], s[name] / div) for s in samples if name in s]
            if pts:
                ax.plot(*zip(*pts, strict=True), lw=1, label=name.partition(":")[2] or None)
        if len(names) > 1:
            ax.legend(fontsize=7)
        ax.set_title(f"{head}{f' ({unit})' if unit else ''}", fontsize=9)
        ax.axvspan(0, warmup, color="0.9")
        for f in faults:
            ax.axvline(f["t"], color=colors.get(f["fault"], "gray"), lw=0.8, ls="--")
    for ax in axes[-1]:
        ax.set_xlabel("s")
    handles = [plt.Line2D([], [], color=c, ls="--", label=k) for k, c in colors.items()]
    fig.suptitle(title, y=0.995, fontsize=10)
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.975), ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.58 / (3.25 * rows)))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    root = args.root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    params, inputs, public = prepare(root, args.kinds)
    state = root / "state"
    if state.exists() and not os.path.ismount(state):
        shutil.rmtree(state)
    mounted = mount_state(state, args.state_size) if args.disk_full else False
    if mounted:
        for p in state.iterdir():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    ray_nodes = None
    if args.ray_nodes:
        from soak_ray import RayNodes

        ray_nodes = RayNodes(args.ray_nodes)
    daemon = Daemon(root, params, state, grace=args.grace, budget=args.budget,
                    retention=args.duration + args.drain_timeout + 3600, backend=args.backend,
                    emulate=args.emulate, ray_address=ray_nodes and ray_nodes.address)
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    end_at = t0 + args.duration
    give_up = end_at + args.drain_timeout
    stream = Stream(daemon, inputs, job_retries=args.job_retries, give_up_at=lambda: give_up, clock=clock)
    faults = Faults(daemon, stream, params, mounted, clock, rng, args.seed, ray_nodes)
    samples: list[dict[str, Any]] = []
    stop_sampling = threading.Event()
    checks: queue.Queue[Request | None] = queue.Queue()
    stream.on_answer = checks.put
    counter = iter(range(1, 1 << 30))
    counter_lock = threading.Lock()

    def next_id(kind: str) -> tuple[str, int]:
        with counter_lock:
            n = next(counter)
        return f"soak{args.seed}-{kind}-{n}", n

    def client_loop(k: int) -> None:
        crng = random.Random(args.seed * 1000 + k)
        while time.monotonic() < end_at:
            circuit, parts, priority, deadline, extra = crng.choice(TEST_MIX)
            rid, n = next_id(circuit)
            stream.run(Request(rid, circuit, priority, deadline, partitions=parts, seed=16 * n, extra=extra),
                       prove_first=crng.random() < 0.5)
            time.sleep(crng.expovariate(1 / args.think))

    def verifier() -> None:  # proofs are checked as they come, not all at the end
        while (req := checks.get()) is not None:
            if req.status == "COMPLETED":
                req.verified = verify(req, params, public)

    def chain_loop(kind: str, period: float, priority: str, deadline: float | None) -> None:
        crng = random.Random(f"{args.seed}-{kind}")
        next_at = time.monotonic() + crng.uniform(0, period / 2)
        threads = []
        while next_at < end_at:
            time.sleep(max(0.0, next_at - time.monotonic()))
            rid, _ = next_id(kind)
            t = threading.Thread(target=stream.run, args=(Request(rid, kind, priority, deadline),),
                                 kwargs={"prove_first": crng.random() < 0.5}, daemon=True)
            t.start()
            threads.append(t)
            next_at += period * crng.uniform(0.8, 1.2)
        for t in threads:
            t.join()

    def sampler() -> None:
        while not stop_sampling.is_set():
            with contextlib.suppress(Exception):
                samples.append(sample(daemon, clock(), ray_nodes))
            stop_sampling.wait(args.interval)

    daemon_answers: dict[str, dict[str, Any]] = {}
    try:
        ready_s = daemon.start(clock)
        print(f"daemon ready in {ready_s:.1f} s (state dir {'a tmpfs' if mounted else 'not a tmpfs'})", flush=True)
        t0 = time.monotonic()  # the run's clock starts once the daemon serves
        end_at = t0 + args.duration
        give_up = end_at + args.drain_timeout
        daemon.starts[-1] = 0.0
        threading.Thread(target=sampler, daemon=True).start()
        checker = threading.Thread(target=verifier, daemon=True)
        checker.start()
        workers = [threading.Thread(target=client_loop, args=(k,), daemon=True) for k in range(args.clients)]
        workers += [threading.Thread(target=chain_loop, args=c, daemon=True) for c in CHAIN if c[0] in inputs]
        for w in workers:
            w.start()
        kinds = [f for f in FAULTS if f not in args.skip_fault and (f != "ray-node" or args.ray_nodes >= 2)]
        slots = max(0, int((args.duration - args.warmup - 10) // args.fault_every))
        order: list[str] = []
        while len(order) < slots:
            batch = kinds[:]
            rng.shuffle(batch)
            order += batch
        times = sorted(rng.uniform(args.warmup + k * args.fault_every, args.warmup + (k + 1) * args.fault_every - 5)
                       for k in range(slots))
        for at, kind in zip(times, order, strict=False):
            time.sleep(max(0.0, at - clock()))
            if time.monotonic() >= end_at:
                break
            faults.inject(kind)
        for w in workers + faults.helpers:
            w.join(max(1.0, give_up - time.monotonic() + 30))
        # What the daemon (its journal) says now, for every id; idle now, it holds no segment.
        daemon_answers = final_answers(daemon, stream)
        time.sleep(2.0)
        for f in faults.log:
            if f.get("segments_of_the_dead"):
                f["orphans_when_idle"] = [n for n in f["segments_of_the_dead"] if os.path.exists(f"/dev/shm/{n}")]
        checks.put(None)
        checker.join()
        time.sleep(args.interval)
    finally:
        stop_sampling.set()
        daemon.tree()
        daemon.signal(signal.SIGTERM)
        exit_code = daemon.wait(120)
        if exit_code is None:
            daemon.signal(signal.SIGKILL)
            daemon.wait(30)
        time.sleep(3)
        leftover_procs = daemon.leftovers()
        if ray_nodes is not None:
            leftover_procs += ray_nodes.shutdown()
        leftover_shm = shm_segments(daemon.pids)[2]
        leftover_held = daemon.room_held() + daemon.held_elsewhere()
        for p in leftover_procs:  # leave the machine clean (the verdict keeps what was found)
            with contextlib.suppress(OSError):
                os.kill(p["pid"], signal.SIGKILL)
        for name in leftover_shm:
            with contextlib.suppress(OSError):
                os.unlink(f"/dev/shm/{name}")
        if mounted:
            subprocess.run(["umount", "-l", str(state)], check=False)
        if daemon.room is not None:
            shutil.rmtree(daemon.room, ignore_errors=True)
    return verdicts(args, stream, faults, daemon, samples, daemon_answers, leftover_procs, leftover_shm,
                    leftover_held, exit_code, params, public)


def final_answers(daemon: Daemon, stream: Stream) -> dict[str, dict[str, Any]]:
    from cuzk.server._gen import proving_pb2 as pb
    from cuzk.server.client import CuzkClient

    out = {}
    with CuzkClient(daemon.unix_addr, timeout=30) as client:
        for rid in list(stream.requests):
            try:
                r = client.await_proof(rid, 1000, rpc_timeout=30)
                out[rid] = {"status": pb.AwaitProofResponse.Status.Name(r.status), "proof": r.proof}
            except Exception as err:
                out[rid] = {"status": f"error: {err}", "proof": b""}
    return out


def verdicts(args: argparse.Namespace, stream: Stream, faults: Faults, daemon: Daemon, samples: list[dict[str, Any]],
             answers: dict[str, dict[str, Any]], leftover_procs: list, leftover_shm: list, leftover_held: list,
             exit_code: int | None, params: Path, public: dict[str, dict]) -> dict[str, Any]:
    reqs = list(stream.requests.values())
    lost = [r.rid for r in reqs if r.status == "LOST"]
    unexplained = [r.rid for r in reqs if r.status in ("FAILED", "CANCELLED") and not r.error]
    disagree = [r.rid for r in reqs if r.status != "LOST" and (
        answers.get(r.rid, {}).get("status") != r.status or answers[r.rid]["proof"] != r.proof)]
    unexpected_failures = [f"{r.rid}: {r.error[:160]}" for r in reqs if r.status != "COMPLETED" and not r.expect_failure
                           and r.status != "LOST"]
    bad_proofs = [r.rid for r in reqs if r.status == "COMPLETED" and not r.verified]
    by_priority: dict[str, dict[str, int]] = {}
    critical_missed_outside_restarts = []
    for r in reqs:
        p = by_priority.setdefault(r.priority, {"requests": 0, "with_deadline": 0, "missed": 0})
        p["requests"] += 1
        if r.deadline_s is None:
            continue
        p["with_deadline"] += 1
        if r.status != "COMPLETED" or r.answered - r.first_submit > r.deadline_s:
            p["missed"] += 1
            overlaps = any(a < r.answered and b > r.first_submit for a, b in faults.down)
            if r.priority == "critical" and not overlaps:
                critical_missed_outside_restarts.append(r.rid)
    skip = [(s, s + args.restart_warmup) for s in daemon.starts]
    answered_in_window = sum(1 for r in reqs if r.answered >= args.warmup)
    # A device process killed comes back with an empty pool, which fills again with its first proofs.
    device_skip = skip + [(f["t"], f["t"] + args.restart_warmup) for f in faults.log if f["fault"] == "kill-device"]
    growth_rows = {}
    for name in (*SERIES, *device_series(samples)):
        g = growth(samples, name, start=args.warmup, skip=device_skip if name.split(":")[0] in DEVICE_SERIES
                   else skip)
        if g is None:
            continue
        g["bound"] = bound(name, g["median"], answered_in_window)
        g["ok"] = g["growth"] <= g["bound"]
        growth_rows[name] = g
    status_unanswered = status_gaps(samples, daemon.starts, args.restart_warmup)
    output = daemon.output_findings()
    checks = {
        "answered": not lost and not unexplained,
        "agreed": not disagree,
        "verified": not bad_proofs,
        **({"critical_deadlines": not critical_missed_outside_restarts} if args.gate_deadlines else {}),
        "growth": all(g["ok"] for g in growth_rows.values()),
        "leftovers": not (leftover_procs or leftover_shm or leftover_held
                          or any(f.get("orphans_when_idle") for f in faults.log)),
        "faults_injected": all("error" not in f for f in faults.log),
        "status": not status_unanswered,
        "corrupt_param_named": all(f.get("names_the_file", True) for f in faults.log),
        "output": output["logging_errors"] == 0,
    }
    return {
        "checks": checks, "ok": all(checks.values()),
        "requests": {"total": len(reqs), "completed": sum(r.status == "COMPLETED" for r in reqs),
                     "failed": sum(r.status == "FAILED" for r in reqs),
                     "cancelled": sum(r.status == "CANCELLED" for r in reqs), "lost": lost,
                     "failed_without_reason": unexplained, "disagreeing": disagree,
                     "unexpected_failures": unexpected_failures, "unverified": bad_proofs,
                     "retried_after_failure": sum(bool(r.failures_seen) for r in reqs),
                     "rpc_errors_seen": sum(len(r.rpc_errors) for r in reqs),
                     "fresh_accepts_over_1": [r.rid for r in reqs if r.fresh_accepts > 1 + len(r.failures_seen)]},
        "deadlines_by_priority": by_priority, "critical_missed_outside_restarts": critical_missed_outside_restarts,
        "growth": growth_rows, "leftover_processes": leftover_procs, "leftover_shm": leftover_shm,
        "leftover_held": leftover_held,
        "final_exit_code": exit_code, "daemon_starts": [round(s, 1) for s in daemon.starts],
        "status_unanswered": status_unanswered,
        "daemon_output": output,
        "faults": faults.log,
        "per_request": [{"id": r.rid, "kind": r.kind, "priority": r.priority, "deadline_s": r.deadline_s,
                         "status": r.status, "error": r.error[:300], "attempts": r.attempts,
                         "latency_s": round(r.answered - r.first_submit, 2), "failures_seen": r.failures_seen,
                         "rpc_errors": r.rpc_errors[:5], "origin": r.origin} for r in reqs],
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=180.0, help="seconds of arrivals and faults")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--root", type=Path, required=True, help="work directory (keys, vanilla proofs, state, logs)")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="the daemon's gpus.backend")
    p.add_argument("--emulate", metavar="SIZE", default=None,
                   help="prove on an emulated CUDA card of this size (4GiB; implies --backend cuda; docs/gpu.md)")
    p.add_argument("--kinds", default=None,
                   help="Filecoin kinds at 2KiB in the stream (default winning,wpost; with --emulate none: a "
                        "WinningPoSt-2KiB takes about 40 s there. porep and snap are also possible; their 2KiB keys "
                        "take minutes to make and each proof minutes on a CPU)")
    p.add_argument("--clients", type=int, default=2, help="closed-loop test-circuit clients")
    p.add_argument("--think", type=float, default=3.0, help="a client's mean pause between requests (s)")
    p.add_argument("--warmup", type=float, default=None, help="seconds before the first fault and the growth fit "
                   "(default: a fifth of --duration, at least 20)")
    p.add_argument("--fault-every", type=float, default=20.0, help="one fault per this many seconds after warm-up")
    p.add_argument("--skip-fault", action="append", default=[], choices=FAULTS)
    p.add_argument("--no-disk-full", dest="disk_full", action="store_false",
                   help="do not mount a tmpfs on the state directory (disk-full is then skipped)")
    p.add_argument("--state-size", default="64m", help="the state directory's tmpfs size")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    p.add_argument("--restart-warmup", type=float, default=20.0,
                   help="seconds after each daemon start left out of the growth fit")
    p.add_argument("--budget", default="4GiB", help="the daemon's memory.total_budget (PoRep-2KiB and SnapDeals-2KiB "
                   "partitions need 3-5 GB each on the CPU backend, beside their keys: 12GiB with them)")
    p.add_argument("--grace", type=float, default=60.0, help="the daemon's shutdown_grace (the SIGTERM fault)")
    p.add_argument("--job-retries", type=int, default=2, help="FAILED answers a client retries with the same id")
    p.add_argument("--drain-timeout", type=float, default=300.0, help="seconds after --duration to wait for answers")
    p.add_argument("--ray-nodes", type=int, default=0,
                   help="run the daemon on the Ray executor over this many nodes on this host, one CPU device each "
                        "(2 or more also injects the ray-node fault); 0: the local executor")
    p.add_argument("--gate-deadlines", action="store_true",
                   help="fail the run on a CRITICAL deadline missed outside a daemon restart (a WinningPoSt-2KiB "
                        "takes about 25 s on a busy 2-core CPU, so its 30 s deadline is reported, not judged, by "
                        "default)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--tag", default=None, help="in the record's name (default: the backend, as in the record)")
    args = p.parse_args(argv)
    from cuzk.config import ConfigError, config_from_dict

    try:  # the daemon's own check of the budget, before any preparation
        config_from_dict({"memory": {"total_budget": args.budget}})
    except ConfigError as err:
        p.error(f"--budget {args.budget}: {err}")
    if args.emulate is not None:
        try:  # the daemon's own check of the card
            config_from_dict({"gpus": {"backend": "cuda", "emulate": [args.emulate]}})
        except ConfigError as err:
            p.error(f"--emulate {args.emulate}: {err}")
        args.backend = "cuda"
    backend = "cuda-emulated" if args.emulate is not None else args.backend
    args.tag = args.tag or backend
    if args.kinds is None:
        args.kinds = "" if args.emulate is not None else "winning,wpost"
    args.kinds = [k for k in args.kinds.split(",") if k]
    if args.warmup is None:
        args.warmup = max(20.0, args.duration / 5)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = dt.datetime.now(dt.UTC)
    args.root.mkdir(parents=True, exist_ok=True)
    lock = open(args.root / ".soak.lock", "a")  # noqa: SIM115 (held until the process ends)
    try:  # two runs on one root would share its socket, state and keys, and judge each other's work
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        p.error(f"--root {args.root}: another soak is running on it")
    result = run(args)
    record = {"benchmark": "bench_soak", "date": started.isoformat(timespec="seconds"), "git": git_revision(),
              "hardware": hardware(), "backend": backend,
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "executor": "ray" if args.ray_nodes else "local",
              "not_injected": [] if args.ray_nodes >= 2 else ["ray-node (the local executor: --ray-nodes 2 or more)"],
              **result}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"soak-{args.tag}-{started.date().isoformat()}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    plot(stem.with_suffix(".png"), result["samples"], result["faults"], args.warmup,
         f"cuzk soak, {backend}{f' {args.emulate}' if args.emulate else ''}, {args.duration:.0f} s, seed "
         f"{args.seed}, {record['git']}")
    summary = {k: result[k] for k in ("checks", "ok", "deadlines_by_priority")}
    summary["requests"] = {k: v for k, v in result["requests"].items()}
    summary["daemon_output"] = result["daemon_output"]
    summary["growth"] = {n: {"growth": round(g["growth"], 1), "bound": round(g["bound"], 1), "ok": g["ok"]}
                         for n, g in result["growth"].items()}
    summary["leftovers"] = {"processes": result["leftover_processes"], "shm": result["leftover_shm"],
                            "held": result["leftover_held"]}
    print(json.dumps(summary, indent=1))
    print(f"record: {stem.with_suffix('.json')}\nplot: {stem.with_suffix('.png')}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
