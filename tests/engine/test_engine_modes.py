"""Engine settings that change the flow: cross-sector batching, pipeline off, slot_size, queue depth, preload."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from engine.engine_helpers import assert_verifies, make_request, start_engine

from cuzk.engine.executors import make_executor
from cuzk.engine.jobs import JobResult, Priority


def spans(results: list[JobResult]) -> list[tuple[int, int]]:
    """(start, end) wall ms of each job's pipeline time (first synthesis start to last device end)."""
    out = []
    for r in results:
        out.append((r.submitted_at_unix_ms + min(p.synth_start_ms for p in r.partitions),
                    r.submitted_at_unix_ms + max(p.device_end_ms for p in r.partitions)))
    return out


def test_batching_collects_jobs_of_one_circuit(tmp_path: Path, debug_params: Path) -> None:
    engine = start_engine(tmp_path, debug_params, scheduler={"max_batch_size": 3, "max_batch_wait_ms": 1500},
                          srs={"preload": ["mimc-3"]})
    try:
        assert engine.srs.snapshot()[0]["tier"] == "HOT"  # srs.preload is honoured at startup
        for k in range(3):
            engine.submit(make_request(f"b{k}", partitions=2, seed=10 * k))
        results = [engine.await_result(f"b{k}", 60) for k in range(3)]
        for k, r in enumerate(results):
            assert_verifies(r, debug_params, seed=10 * k, partitions=2)
        batch_ids = {engine.jobs[f"b{k}"].batch_id for k in range(3)}
        assert len(batch_ids) == 1 and batch_ids != {0}, "the three jobs formed one batch"
        assert max(p.batch_size for r in results for p in r.partitions) > 1, "a device call proved several"
        assert all(r.timings.queue_wait_ms < 1000 for r in results), "a full batch does not wait"
        alone = engine.submit(make_request("alone"))
        result = engine.await_result(alone.job_id, 60)
        assert_verifies(result, debug_params)
        assert result.timings.queue_wait_ms >= 1400, "a lone job waits max_batch_wait_ms for company"
        crit = engine.submit(make_request("urgent", priority=Priority.CRITICAL))
        assert engine.await_result(crit.job_id, 60).timings.queue_wait_ms < 1000, "CRITICAL jobs are never batched"
    finally:
        engine.shutdown(0)


def test_pipeline_off_runs_one_job_at_a_time_and_slots_limit_synthesis(tmp_path: Path, debug_params: Path) -> None:
    engine = start_engine(tmp_path, debug_params, pipeline={"enabled": False, "slot_size": 1,
                                                            "max_gpu_queue_depth": 1})
    try:
        assert engine.window == 1
        for k in range(3):
            engine.submit(make_request(f"j{k}", partitions=3, synth_delay_ms=100, seed=k))
        results = [engine.await_result(f"j{k}", 60) for k in range(3)]
        for k, r in enumerate(results):
            assert_verifies(r, debug_params, seed=k, partitions=3)
        (_, e0), (s1, e1), (s2, _) = spans(results)
        assert e0 <= s1 + 5 and e1 <= s2 + 5, "no overlap between jobs"
        for r in results:  # slot_size = 1: a job's partitions are synthesized one after another
            ordered = sorted(r.partitions, key=lambda p: p.synth_start_ms)
            assert all(a.synth_end_ms <= b.synth_start_ms + 5 for a, b in itertools.pairwise(ordered))
    finally:
        engine.shutdown(0)


@pytest.mark.parametrize("budget", ["1MiB"])
def test_a_budget_below_the_processes_own_memory_is_refused(tmp_path: Path, debug_params: Path, budget: str) -> None:
    from cuzk.engine.memory import BudgetError

    with pytest.raises(BudgetError, match=r"raise memory\.total_budget"):
        start_engine(tmp_path, debug_params, memory={"total_budget": budget}, pipeline={"max_parallel_synthesis": 1})


def test_preload_ids_are_checked_before_anything_starts(tmp_path: Path) -> None:
    from cuzk.config import ConfigError, config_from_dict
    from cuzk.engine.engine import Engine
    from cuzk.providers import default_providers

    data = {"srs": {"param_cache": str(tmp_path), "preload": ["porep-16g"]}, "memory": {"total_budget": "1GiB"}}
    with pytest.raises(ConfigError, match=r"srs\.preload: unknown circuit id 'porep-16g'"):
        config = config_from_dict(data)
        Engine(config, executor=make_executor(config), providers=default_providers(config))
