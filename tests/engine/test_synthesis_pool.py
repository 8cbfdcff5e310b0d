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
