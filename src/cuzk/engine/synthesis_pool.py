"""The synthesis processes of this host, owned by the executor (`Executor.synthesis`).

A pool has `count` regular processes and one more, `critical`, that serves CRITICAL work only: it
has every core's threads and runs at normal CPU priority while the regular ones run at
`SYNTHESIS_NICE`, so CRITICAL work is neither queued nor starved behind the regular synthesis. The
engine's pipeline drives the processes (one feeder thread each, `cuzk.engine.pipeline`); the pool
starts them, replaces the dead and stops them.

Which pool an executor keeps: the local executor's synthesizes every partition its devices prove;
an executor whose devices synthesize on their own nodes (Ray's) keeps one regular process for the
engine's worker calls (circuit shapes, generated test parameters) beside the reserved one.
"""

from __future__ import annotations

import logging

from cuzk.engine.procs import WorkerProcess
from cuzk.engine.providers import WorkerCall
from cuzk.engine.synthesis import SYNTHESIS_NICE, synthesis_worker_main
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.synthesis_pool")

#: At most this many regular processes, whatever the cores (`pipeline.max_parallel_synthesis`).
DEFAULT_MAX_PROCESSES = 18


class SynthesisPool:
    def __init__(self, count: int, *, threads: int, critical_threads: int) -> None:
        """`count` regular processes of `threads` numba threads each, and the reserved one of
        `critical_threads`."""
        self.regular = [WorkerProcess(f"cuzk-synth-{k}", synthesis_worker_main, (threads, SYNTHESIS_NICE))
                        for k in range(max(1, count))]
        self.critical = WorkerProcess("cuzk-synth-critical", synthesis_worker_main, (critical_threads, 0))

    @classmethod
    def for_cores(cls, cores: int, *, max_processes: int = 0, threads: int = 0) -> SynthesisPool:
        """One regular process per core up to `max_processes` (0: DEFAULT_MAX_PROCESSES), the cores'
        threads split between them unless `threads` says; the reserved one gets every core's."""
        count = max(1, min(max_processes or DEFAULT_MAX_PROCESSES, cores))
        return cls(count, threads=threads or max(1, cores // count), critical_threads=threads or cores)

    @property
    def processes(self) -> list[WorkerProcess]:
        """Every process, the reserved one last."""
        return [*self.regular, self.critical]

    def start(self, warm_up: list[WorkerCall]) -> None:
        """Spawn every process; each runs `warm_up` before it reports ready (`wait_ready`), and again
        when it is replaced."""
        for p in self.processes:
            p.args = (*p.args[:2], warm_up)
            p.start()

    def wait_ready(self) -> None:
        for p in self.processes:
            p.wait_ready()

    def stop(self, timeout: float = 2.0) -> None:
        for p in self.processes:
            p.stop(timeout)

    def revive(self) -> int:
        """Replace processes that died while idle (the housekeeper's call; a feeder thread replaces
        the one that dies under it); how many."""
        dead = [p for p in self.processes if p.process is not None and p.process.exitcode is not None
                and not p.stopping]
        for p in dead:
            restart(p, "found dead while idle")
        return len(dead)


def restart(proc: WorkerProcess, reason: str) -> None:
    """Replace a dead synthesis process, logging (not raising) a failure to: its feeder thread or the
    housekeeper tries again at the next partition or pass."""
    try:
        proc.restart(reason)
    except CuzkError as err:
        log.error("cannot restart %s: %s", proc.name, err)
