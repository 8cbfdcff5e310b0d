"""Numbers from a run's samples: percentiles, raw and steady-state s/proof, per-phase summaries.

Raw s/proof is the run's wall time (first submit to last answer) over completed proofs, as the Rust
bench reported it; it includes pipeline fill (nothing completes while the first proof goes through
every stage) and drain (the last proofs run with the pipeline emptying). Steady-state s/proof
leaves both out: with completion times c_0 <= ... <= c_{n-1} and `trim` k (default 1), it is
(c_{n-1-k} - c_{k-1}) / (n - 2k), the mean spacing of completions once the first k proofs are out
and before the last k. With high concurrency, a trim of about the concurrency removes more of the
fill and drain.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from cuzk.bench.phases import PHASES, partition_phases

PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def distribution(values: Sequence[float]) -> dict[str, float | int]:
    """n, mean, min, p50/p95/p99, max of some values."""
    vals = list(values)
    out: dict[str, float | int] = {"n": len(vals)}
    if not vals:
        return out
    out["mean"] = sum(vals) / len(vals)
    out["min"] = min(vals)
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(vals, q)
    out["max"] = max(vals)
    return out


def steady_state(completions_s: Iterable[float], trim: int = 1) -> dict[str, Any] | None:
    """Steady-state seconds per proof from completion times (any clock); None with too few proofs."""
    if trim < 1:
        raise ValueError("trim must be at least 1")
    c = sorted(completions_s)
    n = len(c)
    proofs = n - 2 * trim
    if proofs < 1:
        return None
    window = c[n - 1 - trim] - c[trim - 1]
    return {"s_per_proof": window / proofs, "proofs": proofs, "window_s": window, "trim": trim,
            "excluded_first": trim, "excluded_last": trim}


def measured(samples: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The samples that count (warm-up proofs excluded)."""
    return [s for s in samples if not s.get("warmup")]


def phase_rows(samples: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-partition phase breakdowns of the completed measured samples."""
    rows = []
    for s in measured(samples):
        if s["status"] == "COMPLETED" and s.get("result"):
            rows.extend(partition_phases(s["result"]))
    return rows


def phase_summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Distribution of each phase (and device sub-phase, as `device.<name>`) over partitions, in ms."""
    out = {name: distribution([r["phases"][name] for r in rows]) for name in PHASES}
    sub_names = sorted({k for r in rows for k in r["device_phases"]})
    for name in sub_names:
        out[f"device.{name}"] = distribution([r["device_phases"].get(name, 0.0) for r in rows])
    out["wall"] = distribution([r["wall_ms"] for r in rows])
    return out


def failures(samples: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Failure reasons and how often each occurred."""
    reasons: dict[str, int] = {}
    for s in measured(samples):
        if s["status"] != "COMPLETED":
            key = f"{s['status']}: {s.get('error') or 'no reason given'}"
            reasons[key] = reasons.get(key, 0) + 1
    return reasons


def run_summary(samples: Sequence[dict[str, Any]], *, trim: int = 1) -> dict[str, Any]:
    """Everything one run reports: counts, s/proof raw and steady, latency, phases, failures."""
    ms = measured(samples)
    done = [s for s in ms if s["status"] == "COMPLETED"]
    submitted = len(ms)
    summary: dict[str, Any] = {
        "submitted": submitted, "completed": len(done), "failed": submitted - len(done),
        "failures": failures(ms),
    }
    # Seconds per proof of a mix of kinds (a stress run's) would average a 15 s PoRep with a 0.2 s
    # WinningPoSt into a figure of neither: each kind's own is in the stress summary instead.
    kinds = sorted({s["kind"] for s in ms if s.get("kind")})
    one_kind = len(kinds) <= 1
    if not one_kind:
        summary["mixed_kinds"] = kinds
    if ms:
        wall = (max(s["end_unix_ms"] for s in ms) - min(s["submit_unix_ms"] for s in ms)) / 1000
        summary["wall_s"] = wall
        summary["raw_s_per_proof"] = wall / len(done) if done and one_kind else None
        summary["throughput_per_min_raw"] = 60 * len(done) / wall if wall > 0 and one_kind else None
    steady = steady_state([s["end_unix_ms"] / 1000 for s in done], trim) if one_kind else None
    summary["steady_state"] = steady
    if steady is not None and steady["s_per_proof"] > 0:
        summary["throughput_per_min_steady"] = 60 / steady["s_per_proof"]
    summary["latency_s"] = distribution([s["latency_s"] for s in done])
    summary["server_total_s"] = distribution([s["result"]["total_ms"] / 1000 for s in done if s.get("result")])
    rows = phase_rows(ms)
    summary["partitions"] = len(rows)
    summary["phases_ms"] = phase_summary(rows)
    return summary


def combined_summary(runs: Sequence[Sequence[dict[str, Any]]], *, trim: int = 1) -> dict[str, Any]:
    """The summary of repeated runs: counts, latencies and phases pooled over all of them; s/proof
    (raw and steady state) as the median of the repetitions' own figures, since the time between
    repetitions (their warm-ups) belongs to none of them."""
    pooled = run_summary([s for run in runs for s in run], trim=trim)
    if len(runs) < 2:
        return pooled
    per = [run_summary(run, trim=trim) for run in runs]
    steady = [p["steady_state"]["s_per_proof"] for p in per if p["steady_state"]]
    raw = [p["raw_s_per_proof"] for p in per if p.get("raw_s_per_proof") is not None]
    pooled["wall_s"] = sum(p.get("wall_s", 0.0) for p in per)
    pooled["raw_s_per_proof"] = median(raw) if raw else None
    pooled["throughput_per_min_raw"] = 60 / pooled["raw_s_per_proof"] if pooled["raw_s_per_proof"] else None
    pooled["steady_state"] = None
    pooled.pop("throughput_per_min_steady", None)
    if steady:
        pooled["steady_state"] = {"s_per_proof": median(steady), "proofs": sum(p["steady_state"]["proofs"]
                                                                                for p in per if p["steady_state"]),
                                  "trim": trim, "excluded_first": trim, "excluded_last": trim,
                                  "per_repeat": steady, "of": "median over repeats"}
        if median(steady) > 0:
            pooled["throughput_per_min_steady"] = 60 / median(steady)
    return pooled
