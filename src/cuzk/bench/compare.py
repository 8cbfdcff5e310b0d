"""`cuzk bench compare A.json B.json`: which phases changed between two runs, by how much, beyond noise.

For every phase (and device sub-phase) the value compared is the median over all partitions of
all measured proofs. The noise of a median is estimated from the records themselves:

- with two or more repetitions (`--repeat`) in both records: half the range of the per-repetition
  medians, relative to the median (the larger of A's and B's);
- otherwise: half the width of the 90% bootstrap interval of the median (resampling partitions,
  fixed seed, so the same records always give the same table).

A phase is flagged when its median moved by more than both `min_change` (default 5%) and
`sigmas` (default 3) times the noise, and by at least `min_abs_ms` (default 0.5 ms: the daemon's
stamps have millisecond resolution). Totals (steady-state and raw s/proof, latency percentiles)
are compared the same way in a second table; they move whenever a phase does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from cuzk.bench.phases import PHASES
from cuzk.bench.stats import measured, median, percentile, phase_rows, run_summary

BOOTSTRAP_ROUNDS = 300


@dataclass(frozen=True)
class Row:
    name: str
    a: float
    b: float
    noise_pct: float | None
    flagged: bool

    @property
    def change_pct(self) -> float | None:
        if self.a == 0:
            return None if self.b == 0 else float("inf")
        return 100 * (self.b - self.a) / self.a

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "change_pct": self.change_pct,
                "noise_pct": self.noise_pct, "flagged": self.flagged}


def _runs(record: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [measured(run["samples"]) for run in record.get("runs", [])]


def _phase_values(rows: list[dict[str, Any]], name: str) -> list[float]:
    if name.startswith("device."):
        return [r["device_phases"].get(name.split(".", 1)[1], 0.0) for r in rows]
    return [r["phases"][name] for r in rows]


def _bootstrap_noise(values: list[float], seed: int) -> float | None:
    """Relative half-width of the 90% bootstrap interval of the median."""
    center = median(values)
    if len(values) < 2 or not center:
        return None
    rng = random.Random(seed)
    medians = [median(rng.choices(values, k=len(values))) for _ in range(BOOTSTRAP_ROUNDS)]
    return 100 * (percentile(medians, 95) - percentile(medians, 5)) / 2 / abs(center)


def _spread_noise(per_run: list[float]) -> float | None:
    center = median(per_run)
    if len(per_run) < 2 or not center:
        return None
    return 100 * (max(per_run) - min(per_run)) / 2 / abs(center)


def _noise(per_run_a: list[float], per_run_b: list[float], pooled_a: list[float], pooled_b: list[float],
           seed: int) -> float | None:
    if len(per_run_a) >= 2 and len(per_run_b) >= 2:
        estimates = [_spread_noise(per_run_a), _spread_noise(per_run_b)]
    else:
        estimates = [_bootstrap_noise(pooled_a, seed), _bootstrap_noise(pooled_b, seed + 1)]
    known = [e for e in estimates if e is not None]
    return max(known) if known else None


def _flag(a: float, b: float, noise: float | None, *, min_change: float, sigmas: float, min_abs: float) -> bool:
    if abs(b - a) < min_abs:
        return False
    if a == 0:
        return True
    change = 100 * abs(b - a) / abs(a)
    return change > min_change and change > sigmas * (noise or 0.0)


def compare(a: dict[str, Any], b: dict[str, Any], *, min_change: float = 5.0, sigmas: float = 3.0,
            min_abs_ms: float = 0.5) -> dict[str, Any]:
    """Rows for phases and totals, each with both medians, the change, the noise and the verdict."""
    runs_a, runs_b = _runs(a), _runs(b)
    rows_a = [phase_rows(run) for run in runs_a]
    rows_b = [phase_rows(run) for run in runs_b]
    pooled_a = [r for rows in rows_a for r in rows]
    pooled_b = [r for rows in rows_b for r in rows]
    names = list(PHASES)
    subs = sorted({k for r in pooled_a + pooled_b for k in r["device_phases"]})
    names += [f"device.{k}" for k in subs]
    phases = []
    for k, name in enumerate(names):
        va, vb = _phase_values(pooled_a, name), _phase_values(pooled_b, name)
        if not va or not vb:
            continue
        per_a = [median(_phase_values(rows, name)) for rows in rows_a if rows]
        per_b = [median(_phase_values(rows, name)) for rows in rows_b if rows]
        noise = _noise(per_a, per_b, va, vb, seed=1000 + k)
        ma, mb = median(va), median(vb)
        phases.append(Row(name, ma, mb, noise,
                          _flag(ma, mb, noise, min_change=min_change, sigmas=sigmas, min_abs=min_abs_ms)))
    totals = []
    trim_a = a.get("params", {}).get("trim", 1)
    trim_b = b.get("params", {}).get("trim", 1)
    sums_a = [run_summary(run, trim=trim_a) for run in runs_a]
    sums_b = [run_summary(run, trim=trim_b) for run in runs_b]
    lat_a = [s["latency_s"] for run in runs_a for s in run if s["status"] == "COMPLETED"]
    lat_b = [s["latency_s"] for run in runs_b for s in run if s["status"] == "COMPLETED"]
    metrics = [
        ("steady s/proof", lambda s: (s["steady_state"] or {}).get("s_per_proof")),
        ("raw s/proof", lambda s: s.get("raw_s_per_proof")),
    ]
    for name, get in metrics:
        per_a = [v for v in map(get, sums_a) if v is not None]
        per_b = [v for v in map(get, sums_b) if v is not None]
        if not per_a or not per_b:
            continue
        noise = _spread_noise(per_a) if len(per_a) >= 2 and len(per_b) >= 2 else None
        if noise is not None:
            noise = max(noise, _spread_noise(per_b) or 0.0)
        ma, mb = median(per_a), median(per_b)
        totals.append(Row(name, ma, mb, noise, _flag(ma, mb, noise, min_change=min_change, sigmas=sigmas,
                                                     min_abs=0.0)))
    for q in (50, 95, 99):
        if not lat_a or not lat_b:
            break
        ma, mb = percentile(lat_a, q), percentile(lat_b, q)
        noise = None
        if q == 50:
            noise = max(_bootstrap_noise(lat_a, 7) or 0.0, _bootstrap_noise(lat_b, 8) or 0.0)
        totals.append(Row(f"latency p{q} s", ma, mb, noise,
                          _flag(ma, mb, noise, min_change=min_change, sigmas=sigmas, min_abs=0.0005)))
    return {"phases": [r.as_dict() for r in phases], "totals": [r.as_dict() for r in totals],
            "flagged_phases": [r.name for r in phases if r.flagged],
            "flagged_totals": [r.name for r in totals if r.flagged],
            "thresholds": {"min_change_pct": min_change, "sigmas": sigmas, "min_abs_ms": min_abs_ms},
            "a": _identity(a), "b": _identity(b)}


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    daemon = record.get("daemon") or {}
    return {"created_at": record.get("created_at"), "mode": record.get("mode"),
            "config_fingerprint": daemon.get("config_fingerprint"), "instance_id": daemon.get("instance_id"),
            "commit": (record.get("host") or {}).get("commit"), "runs": len(record.get("runs", []))}
