"""Benchmark runs against a daemon: batch (count proofs, j in flight) and stress (a mix at given rates).

Every proof becomes one sample: what was asked (stream, kind, priority, deadline), the client's own
clock (submit time, answer time, latency), the outcome (COMPLETED, FAILED, CANCELLED, TIMEOUT, or
RPC_ERROR with the gRPC status) and the daemon's result record with per-partition timings. Samples
are counted, never dropped: completed + failed = submitted, always.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from cuzk.bench.inputs import DEFAULT_PRIORITY, ProofInputs
from cuzk.bench.record import result_record
from cuzk.bench.stats import distribution, measured, steady_state
from cuzk.errors import CuzkError

OnSample = Callable[[dict[str, Any]], None]
#: Epoch budgets: a WinningPoSt must be in a block within its 30 s epoch; WindowPoSt within its
#: 30-minute deadline window. Other kinds have no deadline unless a stream gives one.
DEFAULT_DEADLINE_S = {"winning": 30.0, "wpost": 1800.0}


def prove_one(client: Any, inputs: ProofInputs, *, index: int, stream: str = "batch", priority: str = "default",
              deadline_s: float | None = None, warmup: bool = False, wait_s: float | None = None) -> dict[str, Any]:
    """Submit one proof and wait for it (at most `wait_s`, then cancel it); never raises for RPC errors."""
    request = inputs.submit_request(priority=priority)
    submit_unix = time.time()
    start = time.monotonic()
    status, error, result, job_id = "RPC_ERROR", "", None, ""
    try:
        job_id = client.submit(request).job_id
        timeout_ms = 0 if wait_s is None else max(1, round(wait_s * 1000))
        reply = client.await_proof(job_id, timeout_ms, rpc_timeout=None)
        result = result_record(reply)
        status, error = result["status"], result["error"]
        if status == "TIMEOUT":
            error = f"no answer within {wait_s:.1f} s; cancelled"
            client.cancel(job_id)
    except grpc.RpcError as err:
        code = err.code()
        error = f"{code.name if code is not None else 'UNKNOWN'}: {err.details()}"
    latency = time.monotonic() - start
    return {"index": index, "stream": stream, "kind": inputs.label, "priority": priority, "deadline_s": deadline_s,
            "warmup": warmup, "job_id": job_id, "status": status, "error": error,
            "submit_unix_ms": submit_unix * 1000, "end_unix_ms": (submit_unix + latency) * 1000,
            "latency_s": latency, "result": result}


def run_batch(client: Any, inputs: ProofInputs, *, count: int, concurrency: int = 1, warmup: int = 0,
              priority: str = "default", on_sample: OnSample | None = None,
              max_seconds: float | None = None) -> list[dict[str, Any]]:
    """`warmup` proofs one at a time (marked, left out of the numbers), then `count` with `concurrency`
    in flight; samples in submission order. With `max_seconds`, proofs not yet submitted that long
    after the start are left out (the ones in flight are waited for): a run too slow for the time it
    was given still gives the samples it has, where stopping it from outside would give none."""
    if count < 1:
        raise CuzkError(f"-c/--count must be at least 1, got {count}")
    if max_seconds is not None and max_seconds <= 0:
        raise CuzkError(f"--max-seconds must be > 0, got {max_seconds}")
    stop_at = None if max_seconds is None else time.monotonic() + max_seconds
    if concurrency < 1:
        raise CuzkError(f"-j/--concurrency must be at least 1, got {concurrency}")
    if warmup < 0:
        raise CuzkError(f"--warmup must be at least 0, got {warmup}")
    samples: list[dict[str, Any]] = []

    def late() -> bool:
        return stop_at is not None and time.monotonic() >= stop_at

    for k in range(warmup):
        if late():
            return samples
        sample = prove_one(client, inputs, index=-1 - k, priority=priority, warmup=True)
        samples.append(sample)
        if on_sample is not None:
            on_sample(sample)

    def one(k: int) -> dict[str, Any] | None:
        if late():
            return None
        sample = prove_one(client, inputs, index=k, priority=priority)
        if on_sample is not None:
            on_sample(sample)
        return sample

    if concurrency == 1:
        submitted = [one(k) for k in range(count)]
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="cuzk-bench") as pool:
            submitted = list(pool.map(one, range(count)))
    samples.extend(s for s in submitted if s is not None)
    return samples


@dataclass(frozen=True)
class StreamSpec:
    """One kind of work in a stress mix: `rate` proofs per second (Poisson arrivals)."""

    name: str
    inputs: ProofInputs
    rate: float
    priority: str = "default"
    deadline_s: float | None = None

    @property
    def effective_priority(self) -> str:
        return DEFAULT_PRIORITY[self.inputs.kind] if self.priority == "default" else self.priority


def parse_stream(spec: str, make_inputs: Callable[[str, dict[str, str]], ProofInputs]) -> StreamSpec:
    """`KIND[,rate=R][,priority=P][,deadline=S][,name=N][,...]`; other keys go to `make_inputs`."""
    head, *options = [part.strip() for part in spec.split(",")]
    if not head:
        raise CuzkError(f"--stream {spec!r}: starts with the proof kind, e.g. winning,rate=0.1")
    opts: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key or not value:
            raise CuzkError(f"--stream {spec!r}: {option!r} is not key=value")
        opts[key.strip()] = value.strip()
    rate = _float(opts.pop("rate", "1"), spec, "rate")
    if rate <= 0:
        raise CuzkError(f"--stream {spec!r}: rate must be > 0 proofs per second")
    priority = opts.pop("priority", "default").lower()
    if priority not in ("default", "low", "normal", "high", "critical"):
        raise CuzkError(f"--stream {spec!r}: priority {priority!r} is not default, low, normal, high or critical")
    name = opts.pop("name", head)
    deadline_text = opts.pop("deadline", None)
    inputs = make_inputs(head, opts)
    deadline = (_float(deadline_text, spec, "deadline") if deadline_text is not None
                else DEFAULT_DEADLINE_S.get(inputs.kind))
    if deadline is not None and deadline <= 0:
        raise CuzkError(f"--stream {spec!r}: deadline must be > 0 seconds")
    return StreamSpec(name, inputs, rate, priority, deadline)


def _float(text: str, spec: str, key: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise CuzkError(f"--stream {spec!r}: {key}={text!r} is not a number") from None


def arrivals(streams: list[StreamSpec], duration_s: float, seed: int) -> list[tuple[float, StreamSpec]]:
    """Poisson arrival times (seconds from the start) of every stream within `duration_s`, merged."""
    rng = random.Random(seed)
    out: list[tuple[float, StreamSpec]] = []
    for stream in streams:
        t = rng.expovariate(stream.rate)
        while t < duration_s:
            out.append((t, stream))
            t += rng.expovariate(stream.rate)
    out.sort(key=lambda a: a[0])
    return out


def run_stress(client: Any, streams: list[StreamSpec], *, duration_s: float, seed: int = 0,
               drain_timeout_s: float = 600.0, on_sample: OnSample | None = None,
               on_submit: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Submit the mix for `duration_s`, then wait up to `drain_timeout_s` for what is still running
    (anything unanswered by then is cancelled and counted as TIMEOUT)."""
    if duration_s <= 0:
        raise CuzkError(f"--duration must be > 0 seconds, got {duration_s}")
    if not streams:
        raise CuzkError("bench stress needs at least one --stream")
    plan = arrivals(streams, duration_s, seed)
    start = time.monotonic()
    drain_end = start + duration_s + drain_timeout_s
    samples: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(k: int, stream: StreamSpec) -> None:
        sample = prove_one(client, stream.inputs, index=k, stream=stream.name, priority=stream.effective_priority,
                           deadline_s=stream.deadline_s, wait_s=max(0.001, drain_end - time.monotonic()))
        with lock:
            samples.append(sample)
        if on_sample is not None:
            on_sample(sample)

    with ThreadPoolExecutor(max_workers=max(1, min(256, len(plan))), thread_name_prefix="cuzk-stress") as pool:
        for k, (at, stream) in enumerate(plan):
            delay = start + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(one, k, stream)
            if on_submit is not None:
                on_submit(k + 1)
    samples.sort(key=lambda s: s["index"])
    return samples


def _group(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """A group's counts and latencies; its own steady s/proof (its completions only: under a mix this
    is the kind's throughput, which a saturating stream of it keeps at the rate it is served) and the
    device seconds its partitions held a device (what it took from the other kinds)."""
    done = [s for s in samples if s["status"] == "COMPLETED"]
    late = [s for s in done if s["deadline_s"] is not None and s["latency_s"] > s["deadline_s"]]
    failed = len(samples) - len(done)
    has_deadline = any(s["deadline_s"] is not None for s in samples)
    device_ms = sum(max(0, p.get("device_end_ms", 0) - p.get("device_start_ms", 0)
                        - p.get("device_phases_us", {}).get("yielded", 0) / 1000)
                    for s in done for p in (s.get("result") or {}).get("partitions", []))
    return {"submitted": len(samples), "completed": len(done), "failed": failed,
            "deadline_s": sorted({s["deadline_s"] for s in samples if s["deadline_s"] is not None}),
            "late": len(late), "deadline_misses": (len(late) + failed) if has_deadline else None,
            "latency_s": distribution([s["latency_s"] for s in done]),
            "steady_state": steady_state([s["end_unix_ms"] / 1000 for s in done]),
            "device_s": round(device_ms / 1000, 3)}


def stress_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per priority, per proof kind and per stream: counts, late proofs, deadline misses (late or not
    delivered), latency percentiles (p50/p95/p99); and the preemptions: partitions that took their
    device ahead of lower-priority partitions queued for it earlier (`cuzk.bench.timeline.preemptions`)."""
    from cuzk.bench.timeline import preemption_summary, spans_from_samples

    ms = measured(samples)
    by_priority: dict[str, list[dict[str, Any]]] = {}
    by_kind: dict[str, list[dict[str, Any]]] = {}
    by_stream: dict[str, list[dict[str, Any]]] = {}
    for s in ms:
        by_priority.setdefault(s["priority"].upper(), []).append(s)
        by_kind.setdefault(s["kind"], []).append(s)
        by_stream.setdefault(s["stream"], []).append(s)
    order = ["CRITICAL", "HIGH", "NORMAL", "LOW"]
    return {"by_priority": {p: _group(by_priority[p]) for p in sorted(by_priority, key=_rank(order))},
            "by_kind": {kind: _group(group) for kind, group in by_kind.items()},
            "by_stream": {name: _group(group) for name, group in by_stream.items()},
            "preemptions": preemption_summary(spans_from_samples(ms)["spans"])}


def _rank(order: list[str]) -> Callable[[str], int]:
    return lambda name: order.index(name) if name in order else len(order)
