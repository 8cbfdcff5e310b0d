"""The synthesis processes of this host, owned by the executor (`Executor.synthesis`).

A pool has `count` regular processes and one more, `critical`, that serves CRITICAL work only: it
has every core's threads and runs at normal CPU priority while the regular ones run at
`SYNTHESIS_NICE`, so CRITICAL work is neither queued nor starved behind the regular synthesis.

Whoever needs a process asks for one (`process`) and gets the next free one in order: the engine's
worker calls (circuit shapes, generated test parameters) before partitions, then by priority, first
come first served within one. CRITICAL work takes the reserved process when it is free, else a
regular one; other work only regular ones. A process found dead when handed out is replaced first.

Which pool an executor keeps: the local executor's synthesizes every partition its devices prove;
an executor whose devices synthesize on their own nodes (Ray's) keeps one regular process for the
engine's worker calls beside the reserved one.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Iterator
from typing import Any

from cuzk.engine.jobs import Priority
from cuzk.engine.procs import WorkerCrashedError, WorkerProcess
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
        #: name -> (numba threads, nice) of each process, its arguments before the warm-up calls.
        self._threads = {f"cuzk-synth-{k}": (threads, SYNTHESIS_NICE) for k in range(max(1, count))}
        self.regular = [WorkerProcess(name, synthesis_worker_main, spec) for name, spec in self._threads.items()]
        self.critical = WorkerProcess("cuzk-synth-critical", synthesis_worker_main, (critical_threads, 0))
        self._threads[self.critical.name] = (critical_threads, 0)
        self._cv = threading.Condition()
        self._free = list(self.processes)
        #: Waiters in order: (calls first, higher priority first, first come first) -> the process
        #: handed to it, None until then.
        self._waiting: dict[tuple[int, int, int], WorkerProcess | None] = {}
        self._tickets = itertools.count()
        self._stopping = False
        #: Processes that died under their user, with why: replaced when next handed out (or by
        #: `revive`), so that the partition they failed is answered without waiting for a restart.
        self._dead: dict[str, str] = {}
        self._restarts = 0

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
        with self._cv:
            self._stopping = False
        for p in self.processes:
            p.args = (*self._threads[p.name], warm_up)
            p.start()

    def wait_ready(self) -> None:
        for p in self.processes:
            p.wait_ready()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the processes; whoever waits for one is answered with an error."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        for p in self.processes:
            p.stop(timeout)

    @contextlib.contextmanager
    def process(self, priority: int, *, call: bool = False) -> Iterator[WorkerProcess]:
        """The next free process for work of `priority` (a worker call with `call`), held until the
        block ends (module docstring). Raises CuzkError when the pool stops meanwhile."""
        me = (0 if call else 1, -priority, next(self._tickets))
        with self._cv:
            self._waiting[me] = None
            self._hand_out()
            while self._waiting[me] is None and not self._stopping:
                self._cv.wait()
            proc = self._waiting.pop(me)
            if proc is None:
                raise CuzkError("the daemon is shutting down")
        try:
            if not proc.alive and not proc.stopping:
                self._restart(proc, "found dead while idle")
            yield proc
        finally:
            with self._cv:
                self._free.append(proc)
                self._hand_out()

    def _hand_out(self) -> None:
        """Give free processes to the waiters in order (the condition held): the reserved one to the
        first CRITICAL waiter, regular ones to the first waiters of any priority."""
        for me in sorted(k for k, v in self._waiting.items() if v is None):
            if not self._free:
                break
            critical = -me[1] >= Priority.CRITICAL
            proc = (self.critical if critical and self.critical in self._free
                    else next((p for p in self._free if p is not self.critical), None))
            if proc is not None:
                self._free.remove(proc)
                self._waiting[me] = proc
        self._cv.notify_all()

    def died(self, proc: WorkerProcess, reason: str) -> None:
        """`proc` died under its user (`reason`): it is replaced before its next use."""
        with self._cv:
            self._dead[proc.name] = reason

    def call(self, ref: str, args: tuple[Any, ...], *, critical: bool = False) -> Any:
        """Run `ref(*args)` in a process, ahead of partitions, and return its result; `critical` (a
        CRITICAL job's call) lets the reserved process run it too."""
        with self.process(Priority.CRITICAL if critical else 0, call=True) as proc:
            try:
                reply = proc.request(("call", ref, args))
            except WorkerCrashedError as crash:
                self.died(proc, f"died in {ref}")
                raise CuzkError(str(crash)) from None
        if reply[0] != "ok":
            raise CuzkError(f"{ref} failed: {reply[1]}")
        return reply[1]

    def revive(self) -> int:
        """Replace free processes that died (the housekeeper's call); how many."""
        with self._cv:
            dead = [p for p in self._free if p.process is not None and p.process.exitcode is not None
                    and not p.stopping]
            for p in dead:
                self._free.remove(p)
        try:
            for p in dead:
                self._restart(p, "found dead while idle")
        finally:
            with self._cv:
                self._free.extend(dead)
                self._hand_out()
        return len(dead)

    def restarted(self) -> int:
        """Processes replaced since the last call (for the restarts metric)."""
        with self._cv:
            n, self._restarts = self._restarts, 0
        return n

    def _restart(self, proc: WorkerProcess, default_reason: str) -> None:
        """Replace a dead process, logging (not raising) a failure to: its next user or the
        housekeeper tries again."""
        with self._cv:
            reason = self._dead.pop(proc.name, default_reason)
            self._restarts += 1
        try:
            proc.restart(reason)
        except CuzkError as err:
            log.error("cannot restart %s: %s", proc.name, err)
