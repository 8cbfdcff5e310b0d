"""The synthesis processes are the executor's (`cuzk.engine.synthesis_pool`): sized from the cores and
the config, started and stopped with the devices, counted against the host's budget with them, and
replaced when they die while idle."""

from __future__ import annotations

import os
import signal

from cuzk.config import config_from_dict
from cuzk.engine.devices import DeviceSpec
from cuzk.engine.executor import LocalExecutor
from cuzk.engine.procs import WorkerProcess
from cuzk.engine.synthesis import SYNTHESIS_NICE
from cuzk.engine.synthesis_pool import SynthesisPool


def test_a_pool_has_a_process_per_core_up_to_the_cap_and_one_reserved() -> None:
    pool = SynthesisPool.for_cores(32, max_processes=18)
    assert [p.name for p in pool.processes] == [*(f"cuzk-synth-{k}" for k in range(18)), "cuzk-synth-critical"]
    assert pool.regular[0].args == (1, SYNTHESIS_NICE)  # 32 // 18 threads each, at the lower CPU priority
    assert pool.critical.args == (32, 0)  # every core's threads, at normal priority
    assert len(SynthesisPool.for_cores(2).regular) == 2
    assert SynthesisPool.for_cores(8, threads=3).regular[0].args[0] == 3  # synthesis.threads wins


def test_the_local_executor_owns_its_pool_and_counts_its_processes() -> None:
    config = config_from_dict({"pipeline": {"max_parallel_synthesis": 1}, "synthesis": {"threads": 2}})
    executor = LocalExecutor.from_config(config, [DeviceSpec(0, "cpu")])
    assert len(executor.synthesis.regular) == 1 and executor.synthesis.regular[0].args[0] == 2
    procs = executor.processes()
    assert all(isinstance(p, WorkerProcess) for p in procs)
    assert [p.name for p in procs] == ["cuzk-device-cpu0", "cuzk-synth-0", "cuzk-synth-critical"]


def test_a_process_that_died_while_idle_is_replaced_with_its_warm_up() -> None:
    pool = SynthesisPool(1, threads=1, critical_threads=1)
    pool.start([("cuzk.providers.debug:warm_up_synthesis", ())])
    try:
        pool.wait_ready()
        assert pool.revive() == 0
        victim = pool.regular[0]
        first = victim.pid
        assert first is not None and victim.args[2] == [("cuzk.providers.debug:warm_up_synthesis", ())]
        os.kill(first, signal.SIGKILL)
        victim.process.join(10)
        assert pool.revive() == 1
        assert victim.alive and victim.pid != first and victim.restarts == 1
        assert victim.request(("call", "os:getpid", ()))[1] == victim.pid
    finally:
        pool.stop(2.0)
    assert not any(p.alive for p in pool.processes)


def test_processes_go_to_calls_first_then_by_priority_and_the_reserved_one_to_critical_work(monkeypatch) -> None:
    """With every regular process held, waiters get the next free one in order: the engine's worker
    calls, then the highest priority, first come first within it; only CRITICAL work may take the
    reserved process, and it takes it first when it is free."""
    import threading
    import time

    from cuzk.engine.jobs import Priority

    pool = SynthesisPool(1, threads=1, critical_threads=1)
    monkeypatch.setattr(pool, "_restart", lambda proc, reason: None)  # nothing spawned: the order is the test
    order: list[tuple[str, str]] = []
    release = threading.Event()

    def take(name: str, priority: int, call: bool = False) -> None:
        with pool.process(priority, call=call) as proc:
            order.append((name, proc.name))
            if name in ("first", "critical"):
                release.wait(10)

    threads: list[threading.Thread] = []

    def start(*args: object) -> None:
        threads.append(threading.Thread(target=take, args=args))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(pool._waiting) + len(order) < len(threads):  # queued (or in) before the next starts
            assert time.monotonic() < deadline
            time.sleep(0.001)

    start("first", int(Priority.NORMAL))
    start("critical", int(Priority.CRITICAL))  # takes the reserved process at once
    for name, priority, call in (("low", Priority.LOW, False), ("normal", Priority.NORMAL, False),
                                 ("high", Priority.HIGH, False), ("call", Priority.LOW, True)):
        start(name, int(priority), call)
    assert order == [("first", "cuzk-synth-0"), ("critical", "cuzk-synth-critical")]
    release.set()
    for t in threads:
        t.join(10)
    assert [name for name, _ in order[2:]] == ["call", "high", "normal", "low"]
    assert all(proc == "cuzk-synth-0" for _, proc in order[2:])  # the reserved one never serves them


def test_the_local_executor_has_a_lane_per_pipe_and_as_many_more_as_keep_its_synthesis_busy() -> None:
    pool = SynthesisPool.for_cores(5)
    executor = LocalExecutor([DeviceSpec(0, "cpu"), DeviceSpec(1, "cpu")], workers_per_device=2, threads=1,
                             synthesis=pool)
    assert executor.provers_per_device == 2 and len(pool.regular) == 5
    assert executor.workers_per_device == 2 + 3 and executor.critical_lane == 5  # ceil(5 / 2) lanes ahead
    assert [d.proc._channels for d in executor._devices] == [3, 3]  # its pipes: 2 and the CRITICAL lane's
    alone = LocalExecutor.from_config(config_from_dict({"gpus": {"gpu_workers_per_device": 1}}), [DeviceSpec(0, "cpu")],
                                      synthesis_ahead=0)  # a lane per pipe only (bench_ray_overhead's)
    assert (alone.workers_per_device, alone.critical_lane) == (1, 1)
