"""Probe: what planning a PoRep-32GiB request does to the rest of the daemon process.

A daemon plans a request (its C1 output parsed, the partitions' public inputs computed) in a
thread of its own process. This script measures, on any machine (no GPU, no 47 GB key):

1. in-process, the longest pause another Python thread sees while a 32GiB C1 (38.7 MB of JSON) is
   parsed and planned: a C call such as `json.loads` holds the GIL until it returns;
2. through a CPU daemon with the test circuits, the latency of CRITICAL mimc-3 proofs alone, then
   while PoRep-32GiB requests are submitted one after another. Those requests are planned and then
   fail (the param cache holds an empty file under the key's official name): the planning is the
   load, nothing else.

The vanilla proofs come from `cuzk gen-vanilla porep --sector-size 32GiB --sparse --out DIR`. One
JSON line per step is printed and appended to OUT (no hardware envelope: the benchmarks README
names the machine and date of the committed run).

    python benchmarks/probes/probe_planning_stall.py --vanilla DIR OUT.jsonl     # ~1 min
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The PoRep-32GiB key's official file name (an empty stand-in here: planning only checks it exists).
POREP_32G_PARAMS = ("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
                    "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params")


class PauseProbe:
    """A thread that sleeps 1 ms at a time and records how late each wake-up was."""

    def __init__(self) -> None:
        self.wakes: list[tuple[float, float]] = []  # (gap, at)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            self.wakes.append((now - last, now))
            last = now

    def __enter__(self) -> PauseProbe:
        self._thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def longest(self, start: float, end: float) -> float:
        return max((gap for gap, at in self.wakes if start <= at <= end + 1.0), default=0.0)


def in_process(vanilla: Path, cache: Path, log: Callable[..., None]) -> None:
    from cuzk.bench.inputs import ProofInputs, from_gen_vanilla
    from cuzk.providers import build_providers
    from cuzk.server.grpc_service import request_from_proto

    providers = build_providers(str(cache), test_circuits=False)
    message = from_gen_vanilla(vanilla, ProofInputs("porep")).submit_request()
    c1 = (vanilla / "c1.json").read_bytes()
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("request from proto", lambda: request_from_proto(message, providers)),
        ("json.loads of the C1", lambda: json.loads(c1)),
        ("plan (parse, check, public inputs)",
         lambda: providers.for_request(request := request_from_proto(message, providers)).plan(request)),
    ]
    with PauseProbe() as probe:
        for name, step in steps:
            start = time.perf_counter()
            step()
            end = time.perf_counter()
            time.sleep(0.1)
            log(step=name, seconds=round(end - start, 3), longest_pause_s=round(probe.longest(start, end), 3),
                c1_bytes=len(c1))


def through_daemon(vanilla: Path, root: Path, count: int, log: Callable[..., None]) -> None:
    from cuzk.bench.inputs import ProofInputs, from_gen_vanilla
    from cuzk.config import config_from_dict
    from cuzk.providers.debug import debug_params_path, generate_debug_params
    from cuzk.server.client import CuzkClient

    cache = root / "params"
    cache.mkdir(parents=True, exist_ok=True)
    generate_debug_params("mimc-3", str(debug_params_path(cache, "mimc-3")))
    (cache / POREP_32G_PARAMS).write_bytes(b"")
    addr = f"unix://{root / 'cuzk.sock'}"
    config = config_from_dict({
        "daemon": {"listen": [addr], "state_dir": str(root / "state"), "shutdown_grace": "0s"},
        "srs": {"param_cache": str(cache), "preload": ["mimc-3"]}, "memory": {"total_budget": "3GiB"},
        "debug": {"test_circuits": True}, "gpus": {"backend": "cpu"}})
    (root / "cuzk.toml").write_text(config.to_toml())
    with open(root / "daemon.log", "wb") as daemon_log:
        daemon = subprocess.Popen([sys.executable, "-m", "cuzk.cli.main", "daemon", "run", "--config",
                                   str(root / "cuzk.toml")], stdout=daemon_log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        critical = ProofInputs("test", "mimc-3").submit_request(priority="critical")
        porep = from_gen_vanilla(vanilla, ProofInputs("porep")).submit_request()
        with CuzkClient(addr, timeout=60) as client:
            client.wait_ready(120, alive=lambda: daemon.poll() is None)

            def latencies(n: int) -> list[float]:
                out = []
                for _ in range(n):
                    start = time.monotonic()
                    reply = client.await_proof(client.submit(critical).job_id)
                    if not reply.proof:
                        raise RuntimeError(f"the mimc-3 proof failed: {reply.error_message}")
                    out.append(time.monotonic() - start)
                    time.sleep(0.05)
                return out

            latencies(3)
            log(step="CRITICAL mimc-3 alone", **_summary(latencies(count)))
            stop = threading.Event()
            planned: list[tuple[float, str]] = []

            def load() -> None:
                with CuzkClient(addr, timeout=60) as other:
                    while not stop.is_set():
                        start = time.monotonic()
                        reply = other.await_proof(other.submit(porep).job_id)
                        planned.append((time.monotonic() - start, reply.error_message))

            loader = threading.Thread(target=load)
            loader.start()
            time.sleep(0.5)
            try:
                loaded = latencies(count)
            finally:
                stop.set()
                loader.join()
            log(step="CRITICAL mimc-3 while PoRep-32GiB requests are planned", **_summary(loaded),
                porep_requests=len(planned), porep_request_s=round(statistics.mean(s for s, _ in planned), 2),
                porep_outcome=planned[0][1][:120] if planned else "")
    finally:
        daemon.terminate()
        daemon.wait(60)


def _summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {"n": len(values), "p50_s": round(statistics.median(values), 4),
            "p90_s": round(ordered[int(0.9 * (len(ordered) - 1))], 4), "max_s": round(ordered[-1], 4)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vanilla", type=Path, required=True, help="cuzk gen-vanilla porep --sector-size 32GiB output")
    p.add_argument("--count", type=int, default=30, help="CRITICAL proofs per step")
    p.add_argument("--label", default="", help="written into every line (the tree or variant measured)")
    p.add_argument("out", type=Path, help="JSON lines appended here")
    args = p.parse_args()

    def log(**fields: Any) -> None:
        line = json.dumps({**({"label": args.label} if args.label else {}), **fields})
        print(line, flush=True)
        with open(args.out, "a") as f:
            f.write(line + "\n")

    with tempfile.TemporaryDirectory(prefix="cuzk-planning-stall-") as tmp:
        root = Path(tmp)
        cache = root / "params"
        cache.mkdir()
        (cache / POREP_32G_PARAMS).write_bytes(b"")
        in_process(args.vanilla, cache, log)
        through_daemon(args.vanilla, root / "daemon", args.count, log)


if __name__ == "__main__":
    main()
