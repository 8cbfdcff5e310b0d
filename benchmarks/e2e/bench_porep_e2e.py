"""A proof kind end to end through the daemon (PoRep C2 by default; `--kind winning|wpost|snap`):
compiled circuit, insecure parameters, vanilla proofs, a daemon, `cuzk bench batch`, and one proof
checked by two verifiers.

Every step is a `cuzk` command, run the way a user would run it, and timed:
  1. `cuzk circuit compile <kind>-<size>`            the compiled circuit under <root>/params/compiled/
  2. `cuzk params gen --insecure --compiled ...`     the key under its official name (--backend picks the device)
  3. `cuzk gen-vanilla <kind> --sector-size ...`     vanilla proofs of a test sector (sparse from 512MiB;
                                                     WindowPoSt: --sectors of them, default one full partition)
  4. `cuzk daemon run` with the key preloaded        time until it answers ready
  5. `cuzk bench batch -t <kind> --inputs ...`       s/proof, latency, phases (JSON + timeline under --out)
  6. one proof checked by cuzk's verifier (all its partitions) and by the independent py_ecc verifier
     (the first and the last partition): the last proof the batch completed, fetched from the daemon's
     retained results (`--verify-proof new`: one more proof through the daemon's client instead, timed
     alone: the isolated latency)
A step whose output already exists under --root is not redone (the record says so), so a run that
stopped part-way (or `--stop-after`) resumes. The record (JSON, hardware and date) goes to --out;
each run writes its own (a resumed run's record holds the steps it ran). Steps 4-6 run once per
`--memory-limit` value (`[gpus] memory_limit`, "none" for none) on the same key and vanilla proofs,
each under `runs` in the record with its device memory plan, the pool's peak, OOM retries and the
driver's peak used memory sampled while it ran; a run that fails or times out is recorded and the
next one still runs.

    python benchmarks/e2e/bench_porep_e2e.py --sector-size 32GiB --backend cuda --root /data/e2e -c 5 -j 2 \
        --memory-limit none,24GiB,16GiB,32GiB --bench-timeout 300

    python benchmarks/e2e/bench_porep_e2e.py --sector-size 32GiB --backend cuda --root /data/e2e -c 5 -j 2
    python benchmarks/e2e/bench_porep_e2e.py --sector-size 2KiB --backend cpu --root /tmp/e2e -c 2 -j 1
    python benchmarks/e2e/bench_porep_e2e.py --kind winning --sector-size 32GiB --backend cuda --root /data/e2e-win \
        -c 20 -j 1 --warmup 2

`--deadline SECONDS` fits the whole run into a wall-clock budget (a lent machine's call): each memory
limit's batch stops submitting proofs (`cuzk bench batch --max-seconds`) so that its proofs in flight,
the verification and the daemon's stop still fit, and is stopped outright only past the budget, so a
short call still ends with a record and a verified proof.

With `--device-witness on` the daemon writes PoRep's SHA-256 aux on the GPU (files tagged "-dw"): run it
after a run without, on the same --root and machine, for a side-by-side comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import RESULTS, git_revision, hardware, nvidia_smi

#: The proof kinds, as `cuzk gen-vanilla` and `cuzk bench -t` name them.
KINDS = ("porep", "winning", "wpost", "snap")


class StepTimeoutError(Exception):
    """A step ran past its --*-timeout and was stopped (SIGTERM, then SIGKILL)."""


def _cuzk(*args: str, log: Path, timeout: float | None = None) -> float:
    """Run one cuzk command, its output appended to `log`; its seconds. Past `timeout` the command
    gets SIGTERM (20 s to leave cleanly), then SIGKILL, and StepTimeoutError is raised."""
    cmd = [sys.executable, "-m", "cuzk.cli.main", *args]
    print("+ cuzk", " ".join(args), flush=True)
    start = time.perf_counter()
    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)
        try:
            returncode = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _stop(proc, 20)
            raise StepTimeoutError(f"cuzk {' '.join(args[:2])} stopped after {timeout:.0f} s") from None
    if returncode:
        sys.stdout.write(log.read_text(errors="replace")[-4000:])
        raise subprocess.CalledProcessError(returncode, cmd)
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", default="porep", choices=KINDS, help="the proof kind")
    p.add_argument("--sector-size", default="2KiB", help="2KiB, 8MiB, 512MiB, 32GiB, 64GiB")
    p.add_argument("--sectors", type=int, default=0,
                   help="wpost: sectors in the vanilla proofs (default: one full partition of the proof type)")
    p.add_argument("--backend", default="cpu", choices=("cpu", "cuda"), help="daemon and key generation device")
    p.add_argument("--root", type=Path, required=True, help="work directory (params, vanilla, daemon state)")
    p.add_argument("-c", "--count", type=int, default=5)
    p.add_argument("-j", "--concurrency", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--workers-per-device", type=int, default=2)
    p.add_argument("--ready-timeout", type=float, default=900.0)
    p.add_argument("--bench-timeout", type=float, default=None, help="seconds before `cuzk bench batch` is stopped")
    p.add_argument("--bench-max-seconds", type=float, default=None,
                   help="`cuzk bench batch --max-seconds`: submit no proof after this many seconds, keep the samples "
                        "(give --bench-timeout room for the proofs still in flight)")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="wall-clock seconds for the whole run, from its start: each batch stops submitting when "
                        "what is left, less --deadline-reserve, is used up (shared among the memory limits still "
                        "to run), and is stopped at the deadline less 30 s")
    p.add_argument("--deadline-reserve", type=float, default=90.0, metavar="SECONDS",
                   help="with --deadline: seconds kept for the proofs in flight when a batch stops submitting, "
                        "the verification and the daemon's stop (default 90)")
    p.add_argument("--stop-after", choices=("compile", "params", "vanilla"),
                   help="prepare only up to this step (a later run resumes from there)")
    p.add_argument("--device-witness", default="deadlines", choices=("off", "on", "deadlines"),
                   help="the daemon's [synthesis] device_witness (on: every job's deferred aux written on the GPU; "
                        "deadlines: HIGH and CRITICAL jobs' only)")
    p.add_argument("--memory-limit", default="none",
                   help="the daemon's [gpus] memory_limit ('none', 'auto' or a size such as 16GiB); a comma-"
                        "separated list runs steps 4-6 once per value, one after the other on the same key and "
                        "vanilla proofs. Each run's record adds the device plan from the daemon's status and "
                        "the driver's peak used memory")
    p.add_argument("--devices", default="", help="the daemon's [gpus] devices, comma-separated ordinals (a repeated "
                   "ordinal is a second logical device on that GPU); default: every GPU")
    p.add_argument("--device-mode", default="", choices=("", "latency", "throughput"),
                   help="the daemon's [scheduler] device_mode (default: the daemon's)")
    p.add_argument("--executor", default="local", choices=("local", "ray"),
                   help="the daemon's [executor] kind; ray: a one-node Ray cluster on this host (`ray start --head`, "
                        "loopback, no dashboard) is started for each run and stopped after it (docs/ray.md)")
    p.add_argument("--ray-port", type=int, default=6390, help="with --executor ray: the head's GCS port")
    p.add_argument("--synthesis-ahead", type=int, default=None,
                   help="with --executor ray: the daemon's [executor] synthesis_ahead (default: the daemon's)")
    p.add_argument("--verify-proof", default="batch", choices=("batch", "new"),
                   help="step 6: verify the batch's last completed proof, from the daemon's retained results "
                        "(no device time), or prove a new one through the client, which also times one proof "
                        "alone on the daemon (the record's prove_one: the isolated latency)")
    p.add_argument("--status-listen", default="127.0.0.1:9876", help="the daemon's status endpoint, read at the end")
    p.add_argument("--tag", default="", help="file name tag (default: backend and sector size, '-dw' with "
                                             "--device-witness on)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args()
    if args.deadline is not None and args.deadline <= 0:
        p.error(f"--deadline must be > 0 seconds, got {args.deadline:g}")
    args.deadline_at = None if args.deadline is None else time.monotonic() + args.deadline
    # `timeout` (or a device call's limit) sends SIGTERM: leave through the finally blocks, so the daemon
    # is stopped and the record saved.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from cuzk.engine.compiled_store import SUFFIX as COMPILED_SUFFIX
    from cuzk.errors import CuzkError
    from cuzk.filecoin.sizes import CircuitKind, circuit_id, parameter_file_name, sector_params

    size = sector_params(args.sector_size)
    kind = CircuitKind(args.kind)
    cid = circuit_id(kind, size)
    root = args.root.resolve()
    # One root may hold several kinds (a stress run's daemon preloads each): their vanilla proofs and
    # step records apart, the keys side by side in params/.
    params_dir, vanilla_dir = root / "params", vanilla_dir_of(root, args.kind)
    params_dir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    caps = [c.strip() for c in args.memory_limit.split(",") if c.strip()]
    if not caps:
        p.error("--memory-limit: give at least one value")
    tag = args.tag or (f"{args.backend}-{size.short}{'-dw' if args.device_witness == 'on' else ''}"
                       f"{f'-cap{caps[0]}' if caps != ['none'] and len(caps) == 1 else ''}"
                       f"{'-caps' if len(caps) > 1 else ''}")
    stamp = dt.date.today().isoformat()
    log = args.out / f"{args.kind}-e2e-{tag}-{stamp}.log"
    record: dict = {"benchmark": "bench_porep_e2e", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "git": git_revision(), "hardware": hardware(), "gpu": nvidia_smi(), "kind": args.kind,
                    "circuit_id": cid,
                    "backend": args.backend, "count": args.count, "concurrency": args.concurrency,
                    "warmup": args.warmup, "device_witness": args.device_witness,
                    "memory_limits": caps, "steps": {}}
    steps = record["steps"]
    record_path = args.out / f"{args.kind}-e2e-{tag}-{stamp}.json"

    # Steps an earlier run did (a resumed run's record keeps their figures).
    earlier_path = root / f"steps-{args.kind}.json"
    earlier = json.loads(earlier_path.read_text()) if earlier_path.exists() else {}

    def save() -> None:
        record_path.write_text(json.dumps(record, indent=1) + "\n")
        earlier_path.write_text(json.dumps({**earlier, **{k: v for k, v in steps.items() if "skipped" not in v}}))

    def skipped(name: str, **extra: object) -> dict:
        return {"skipped": "exists", **extra, **({"earlier_run": earlier[name]} if name in earlier else {})}

    # 1. compiled circuit
    compiled = params_dir / "compiled" / f"{cid}{COMPILED_SUFFIX}"
    if compiled.exists():
        steps["compile"] = skipped("compile", bytes=compiled.stat().st_size)
    else:
        seconds = _cuzk("circuit", "compile", cid, "--param-cache", str(params_dir), log=log)
        steps["compile"] = {"seconds": seconds, "bytes": compiled.stat().st_size}
    save()
    if args.stop_after == "compile":
        return 0

    # 2. parameters (official name: the daemon finds them there)
    params = params_dir / parameter_file_name(kind, size)
    if params.exists():
        steps["params"] = skipped("params", bytes=params.stat().st_size)
    else:
        seconds = _cuzk("params", "gen", "--insecure", cid, str(params), "--compiled", str(compiled), "--backend",
                        args.backend, "--seed", "1", "--force-official-name", log=log)
        steps["params"] = {"seconds": seconds, "bytes": params.stat().st_size}
    save()
    if args.stop_after == "params":
        return 0

    # 3. vanilla proofs
    if (vanilla_dir / "public.json").exists():
        steps["vanilla"] = skipped("vanilla")
    else:
        sparse = ["--sparse"] if size.nodes > 1 << 18 else []
        sectors = ["--sectors", str(args.sectors or _partition_sectors(size))] if kind is CircuitKind.WINDOW else []
        steps["vanilla"] = {"seconds": _cuzk("gen-vanilla", args.kind, "--sector-size", size.name, *sparse, *sectors,
                                             "--out", str(vanilla_dir), log=log)}
    save()
    if args.stop_after == "vanilla":
        return 0

    # 4-6 per memory_limit: daemon, benchmark, one proof and its verifiers
    record["runs"] = {}
    for k, cap in enumerate(caps):
        run: dict = record["runs"].setdefault(cap, {})
        args.runs_left = len(caps) - k
        try:
            _daemon_run(args, cap, run, cid=cid, root=root, params=params, vanilla_dir=vanilla_dir,
                        tag=tag if len(caps) == 1 else f"{tag}-cap{cap}", stamp=stamp, log=log, save=save)
        except (StepTimeoutError, subprocess.CalledProcessError, CuzkError) as err:
            run["error"] = f"{type(err).__name__}: {err}"
            print(f"error: memory_limit {cap}: {err}", file=sys.stderr)
        save()
    print(json.dumps({cap: {k: run[k] for k in ("verification", "error") if k in run}
                      for cap, run in record["runs"].items()}, indent=1))
    ok = all(run.get("verification", {}).get("all_verified", False) for run in record["runs"].values())
    return 0 if ok else 1


def _daemon_run(args: argparse.Namespace, cap: str, run: dict, *, cid: str, root: Path, params: Path,
                vanilla_dir: Path, tag: str, stamp: str, log: Path, save: Any) -> None:
    """Steps 4-6 under `[gpus] memory_limit = cap` ("none": unset), each one's figures into `run`."""
    gpus = {"backend": args.backend, "gpu_workers_per_device": args.workers_per_device,
            **({"memory_limit": cap} if cap != "none" else {}),
            **({"devices": [int(d) for d in args.devices.split(",")]} if args.devices else {})}
    extra = {**({"scheduler": {"device_mode": args.device_mode}} if args.device_mode else {}),
             "synthesis": {"device_witness": args.device_witness}}
    daemon_log_path = args.out / f"{args.kind}-e2e-daemon-{tag}-{stamp}.log"
    with contextlib.ExitStack() as stack:
        if args.executor == "ray":
            ray_log = args.out / f"{args.kind}-e2e-ray-{tag}-{stamp}.log"
            address = stack.enter_context(ray_head(root, args.ray_port, ray_log, gpus=args.backend == "cuda"))
            ahead = {} if args.synthesis_ahead is None else {"synthesis_ahead": args.synthesis_ahead}
            extra["executor"] = {"kind": "ray", "address": address, **ahead}
            run["executor"] = extra["executor"]
        _bench_and_prove(args, run, cid=cid, root=root, params=params, vanilla_dir=vanilla_dir, tag=tag, stamp=stamp,
                         log=log, save=save, gpus=gpus, extra=extra, daemon_log_path=daemon_log_path)


def _bench_and_prove(args: argparse.Namespace, run: dict, *, cid: str, root: Path, params: Path, vanilla_dir: Path,
                     tag: str, stamp: str, log: Path, save: Any, gpus: dict, extra: dict,
                     daemon_log_path: Path) -> None:
    """Steps 4-6 with the daemon's config sections made."""
    with running_daemon(root, [cid], gpus, extra, log_path=daemon_log_path, status_listen=args.status_listen,
                        ready_timeout=args.ready_timeout, run=run, cuda=args.backend == "cuda") as (addr, sampler):
        save()
        # 5. the benchmark
        batch = args.out / f"{args.kind}-e2e-batch-{tag}-{stamp}"
        max_seconds, timeout = batch_limits(args.bench_max_seconds, args.bench_timeout, args.deadline_at,
                                            args.deadline_reserve, getattr(args, "runs_left", 1), time.monotonic())
        if args.deadline_at is not None:
            run["deadline"] = {"batch_max_seconds": max_seconds, "batch_timeout": timeout}
        try:
            run["bench_batch"] = {"seconds": _cuzk(
                "bench", "batch", "-t", args.kind, "--inputs", str(vanilla_dir), "-c", str(args.count), "-j",
                str(args.concurrency), "--warmup", str(args.warmup), "--json", f"{batch}.json", "--timeline",
                f"{batch}.png", "--addr", addr, "--no-progress",
                *(("--max-seconds", f"{max_seconds:.0f}") if max_seconds else ()),
                log=log, timeout=timeout)}
        finally:  # also after a timeout: the plan and the memory it reached
            run["device_memory"] = _device_memory(args.status_listen, sampler)
        summary = json.loads(Path(f"{batch}.json").read_text())
        run["bench_summary"] = summary.get("summary", {})
        if "stopped" in summary:
            run["bench_stopped"] = summary["stopped"]
        save()

        # 6. one proof, two verifiers
        from cuzk.bench.inputs import ProofInputs, from_gen_vanilla
        from cuzk.errors import CuzkError
        from cuzk.server.client import CuzkClient

        public = json.loads((vanilla_dir / "public.json").read_text())
        done = [sample["job_id"] for batch_run in summary.get("runs", []) for sample in batch_run.get("samples", [])
                if sample.get("status") == "COMPLETED" and sample.get("job_id")]
        result = None
        with CuzkClient(addr, timeout=None) as client:
            if args.verify_proof == "batch" and done:
                # Every proof of the batch has the same inputs: its last one is checked, not a new one made.
                result = client.await_proof(done[-1])
                run["verified_job"] = {"job_id": done[-1], "from": "batch", "status": int(result.status),
                                       "error": result.error_message}
                if not result.proof:
                    result = None
            if result is None:
                request = from_gen_vanilla(vanilla_dir, ProofInputs(args.kind)).submit_request()
                start = time.perf_counter()
                result = client.await_proof(client.submit(request).job_id)
                run["prove_one"] = {"seconds": time.perf_counter() - start, "status": int(result.status),
                                    "error": result.error_message, "total_ms": result.total_ms}
        if not result.proof:
            raise CuzkError(f"the proof through the daemon failed: {result.error_message}")
        run["verification"] = _verify(args.kind, result.proof, public, params.with_suffix(".vk"))


def batch_limits(max_seconds: float | None, timeout: float | None, deadline_at: float | None, reserve: float,
                 runs_left: int, now: float) -> tuple[float | None, float | None]:
    """The batch's (--max-seconds, timeout): as given, or within a deadline (`deadline_at`, on the
    monotonic clock): submitting stops once this run's share of what is left, less `reserve`, is
    used (the runs still to come get equal shares), and the batch is stopped 30 s before the
    deadline. Either limit given explicitly stays when it is the tighter one."""
    if deadline_at is None:
        return max_seconds, timeout
    left = deadline_at - now
    share = max(1.0, (left - reserve) / max(1, runs_left))
    hard = max(1.0, left - 30.0)
    return (min(share, max_seconds) if max_seconds else share), (min(hard, timeout) if timeout else hard)


@contextlib.contextmanager
def ray_head(root: Path, port: int, log_path: Path, *, gpus: bool) -> Iterator[str]:
    """A one-node Ray cluster on this host for the daemon to join (`ray start --head --block`, in a
    session of its own, stopped by signalling that process, which takes its raylet and GCS down with
    it); yields its GCS address once the port answers."""
    temp = root / "ray"
    temp.mkdir(exist_ok=True)
    # Loopback only: without this Ray resolves the driver's (the daemon's) node address to the host's
    # outward one, which no raylet here has. The head and the daemon (started after, with this
    # environment) share a token of this run's own: a driver that sends none is refused by a head that
    # turned token authentication on by itself (Ray 2.60 did, with a token in ~/.ray/auth_token).
    token = temp / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
                       "RAY_AUTH_TOKEN_PATH": str(token)})
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", "--port", str(port),
           "--node-ip-address", "127.0.0.1", "--include-dashboard", "false", "--disable-usage-stats",
           "--temp-dir", str(temp), "--num-cpus", str(os.cpu_count() or 1),
           *(() if gpus else ("--num-gpus", "0", "--resources", json.dumps({"cuzk_device": 1})))]
    print("+", " ".join(cmd[2:]), flush=True)
    out = open(log_path, "wb")  # noqa: SIM115 - Ray writes it until stopped
    head = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if head.poll() is not None:
                raise RuntimeError(f"ray start exited with {head.returncode}: see {log_path}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not answer on port {port} within 120 s: see {log_path}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        _stop(head, 60)
        out.close()


def _stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM, `grace` seconds to leave cleanly, then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def vanilla_dir_of(root: Path, kind: str) -> Path:
    """Where step 3 writes `kind`'s vanilla proofs under `root`."""
    return root / f"vanilla-{kind}"


@contextlib.contextmanager
def running_daemon(root: Path, circuits: list[str], gpus: dict, extra: dict, *, log_path: Path, status_listen: str,
                   ready_timeout: float, run: dict, cuda: bool) -> Iterator[tuple[str, DriverMemorySampler | None]]:
    """A `cuzk daemon run` on `root` (params/ its param cache) with `circuits` preloaded and `gpus` as
    its [gpus] section (`extra`: other sections), ready; yields its address and the driver's memory
    sampler (CUDA), and stops it on leaving. Its config and seconds to ready go into `run`; its log
    to `log_path`, so that a run stopped from outside still leaves its timelines there."""
    from cuzk.config import config_from_dict
    from cuzk.server.client import CuzkClient

    addr = f"unix://{root / 'cuzk.sock'}"
    config = config_from_dict({
        "daemon": {"listen": [addr], "state_dir": str(root / "state"), "shutdown_grace": "0s",
                   "status_listen": status_listen},
        "srs": {"param_cache": str(root / "params"), "preload": circuits}, "gpus": gpus, **extra,
    })
    (root / "cuzk.toml").write_text(config.to_toml())
    run["daemon_config_toml"] = config.to_toml()
    daemon_log = open(log_path, "wb")  # noqa: SIM115 - the daemon writes it until stopped
    start = time.perf_counter()
    daemon = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config",
                               str(root / "cuzk.toml")], stdout=daemon_log, stderr=subprocess.STDOUT,
                              # Its own session: `timeout` signals our whole process group, and a second
                              # signal would make the daemon abort; this script stops it (finally, below).
                              start_new_session=True)
    sampler = DriverMemorySampler() if cuda else None
    host = HostMemorySampler()
    try:
        with CuzkClient(addr, timeout=5) as client:
            client.wait_ready(ready_timeout, alive=lambda: daemon.poll() is None)
        run["daemon_ready"] = {"seconds": time.perf_counter() - start}
        yield addr, sampler
    finally:
        if sampler is not None:
            sampler.stop()
        run["host_memory"] = host.stop()
        _stop(daemon, 120)
        daemon_log.close()


class DriverMemorySampler:
    """The device's used memory as the driver reports it (nvidia-smi every 100 ms, the whole GPU: every
    process's allocations and contexts), sampled from the daemon's start; `peak_bytes` is the most seen."""

    def __init__(self) -> None:
        self.peak_mib = 0
        self.samples = 0
        self._proc = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                       "-lms", "100", "-i", "0"], stdout=subprocess.PIPE, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._proc.stdout:  # type: ignore[union-attr]
            if line.strip().isdigit():
                self.peak_mib = max(self.peak_mib, int(line))
                self.samples += 1

    @property
    def peak_bytes(self) -> int:
        return self.peak_mib << 20

    def stop(self) -> None:
        self._proc.terminate()
        self._proc.wait(10)


class HostMemorySampler:
    """The host's memory while the daemon runs: /proc/meminfo every `interval` s, from the daemon's
    start. What the record keeps is the least MemAvailable seen (the host's low point, every process
    on it counted), as bytes used = MemTotal - MemAvailable, with its time from the start."""

    def __init__(self, interval: float = 0.5, meminfo: Path = Path("/proc/meminfo")) -> None:
        self._meminfo, self._interval = meminfo, interval
        self.total = 0
        self.min_available: int | None = None
        self.min_at_s = 0.0
        self.samples = 0
        self._start = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self) -> tuple[int, int] | None:
        try:
            fields = dict(line.split(":", 1) for line in self._meminfo.read_text().splitlines() if ":" in line)
            return int(fields["MemTotal"].split()[0]) << 10, int(fields["MemAvailable"].split()[0]) << 10
        except (OSError, KeyError, ValueError):
            return None

    def _run(self) -> None:
        while True:
            got = self._read()
            if got is not None:
                self.total, available = got
                self.samples += 1
                if self.min_available is None or available < self.min_available:
                    self.min_available, self.min_at_s = available, time.monotonic() - self._start
            if self._done.wait(self._interval):
                return

    def stop(self) -> dict:
        """Stop sampling; the record's entry."""
        self._done.set()
        self._thread.join(5)
        if self.min_available is None:
            return {"error": f"{self._meminfo} could not be read", "samples": 0}
        return {"total_bytes": self.total, "min_available_bytes": self.min_available,
                "peak_used_bytes": self.total - self.min_available, "peak_at_s": round(self.min_at_s, 1),
                "samples": self.samples, "interval_s": self._interval}


def daemon_status(status_listen: str) -> dict:
    """The daemon's /status (OSError when it does not answer)."""
    import urllib.request

    with urllib.request.urlopen(f"http://{status_listen}/status", timeout=10) as r:
        return json.loads(r.read())


def _device_memory(status_listen: str, sampler: DriverMemorySampler | None) -> dict:
    """Each device's memory plan from the daemon's /status (resident and streamed vectors per key, the
    pool's peak, OOM retries) and the driver's peak used memory over the run."""
    try:
        status = daemon_status(status_listen)
    except OSError as err:
        status = {"error": str(err)}
    plans = [{"device": d.get("label", d.get("ordinal")), "partitions_proven": d.get("partitions_proven"),
              "busy_secs": d.get("busy_secs"), "memory_plan": d.get("memory_plan")} for d in status.get("devices", [])]
    out: dict = {"plans": plans}
    if sampler is not None:
        out.update(driver_peak_used_bytes=sampler.peak_bytes, driver_samples=sampler.samples)
    return out


def _verify(kind: str, proof: bytes, public: dict, vk_path: Path) -> dict:
    """cuzk's verifier of the kind (filecoin-proofs' verify_seal, verify_winning_post, verify_window_post,
    verify_empty_sector_update_proof) on every partition, py_ecc's (independent) on the first and the last."""
    from cuzk.circuits.filecoin.compound_porep import seal_public_inputs, verify_seal
    from cuzk.circuits.filecoin.compound_post import (
        fallback_post_public_inputs,
        verify_window_post,
        verify_winning_post,
    )
    from cuzk.circuits.filecoin.compound_snap import update_public_inputs, verify_update
    from cuzk.filecoin.sizes import post_proof, seal_proof, update_proof
    from cuzk.groth16 import reference_verifier
    from cuzk.groth16.formats.params_file import read_vk

    vk = read_vk(vk_path)
    start = time.perf_counter()
    if kind == "porep":
        registered = seal_proof(int(public["registered_proof_id"]))
        fields = {"comm_r": bytes.fromhex(public["comm_r"]), "comm_d": bytes.fromhex(public["comm_d"]),
                  "prover_id": bytes.fromhex(public["prover_id"]), "sector_id": int(public["sector_id"]),
                  "ticket": bytes.fromhex(public["ticket"]), "seed": bytes.fromhex(public["seed"])}
        ours = verify_seal(vk, proof, registered_proof=registered, **fields)

        def inputs(k: int) -> list[int]:
            return seal_public_inputs(registered, k=k, **fields)
    elif kind in ("winning", "wpost"):
        registered_post = post_proof(int(public["registered_proof_id"]))
        randomness, prover_id = bytes.fromhex(public["randomness"]), bytes.fromhex(public["prover_id"])
        replicas = {int(c["sector_id"]): bytes.fromhex(c["comm_r"]) for c in public["challenged_sectors"]}
        if kind == "winning":
            ours = verify_winning_post(vk, proof, registered_proof=registered_post, randomness=randomness,
                                       prover_id=prover_id, replicas=replicas)
            sectors = list(replicas.items()) * int(public["circuit_sector_count"])
        else:
            ours = verify_window_post(vk, proof, registered_proof=registered_post, randomness=randomness,
                                      prover_id=prover_id, replicas=replicas)
            sectors = sorted(replicas.items())

        def inputs(k: int) -> list[int]:
            return fallback_post_public_inputs(registered_post, randomness=randomness, sectors=sectors, k=k)
    else:
        registered_update = update_proof(int(public["registered_proof_id"]))
        comms = {name: bytes.fromhex(public[name]) for name in ("comm_r_old", "comm_r_new", "comm_d_new")}
        ours = verify_update(vk, proof, registered_proof=registered_update, **comms)

        def inputs(k: int) -> list[int]:
            return update_public_inputs(registered_update, k=k, **comms)
    ours_s = time.perf_counter() - start
    vk_bytes = vk_path.read_bytes()
    partitions = len(proof) // 192
    independent = {}
    start = time.perf_counter()
    for k in sorted({0, partitions - 1}):
        independent[str(k)] = reference_verifier.verify(vk_bytes, proof[192 * k:192 * (k + 1)], inputs(k))
    return {"proof_bytes": len(proof), "partitions": partitions, "cuzk_verify": ours, "cuzk_verify_seconds": ours_s,
            "py_ecc_partitions": independent, "py_ecc_seconds": time.perf_counter() - start,
            "all_verified": ours and all(independent.values())}


def _partition_sectors(size: object) -> int:
    """Sectors in one full WindowPoSt partition (`size.window_post_sectors`: 2,349 at 32GiB)."""
    return int(size.window_post_sectors)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
