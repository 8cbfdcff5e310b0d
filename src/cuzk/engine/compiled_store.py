"""Compiled circuits on disk, next to the parameters: which exist, building them, loading them.

A `CompiledStore` is a directory (by default `<srs.param_cache>/compiled/`) holding one compiled
circuit per circuit id, `<circuit_id>.cuzk-r1cs` (format: `cuzk.r1cs.compiled_file`). Its state is
kept in files so that every process sees the same thing (the daemon, its synthesis workers, a
second daemon on the same cache, `cuzk circuit compile`):

=========  ===================================================================================
state      meaning
=========  ===================================================================================
ready      the file exists, its header checks out and it was compiled from this synthesis code
building   `<id>.building` names a live builder process (pid and its start time)
failed     `<id>.failed` holds the error of the last build; not retried until `reset` / `build`
stale      a file exists but is unusable (other synthesis code, another format version, a bad
           header): it is ignored, and replaced by the next build
absent     none of the above
=========  ===================================================================================

Building records the circuit id's blank circuit (`cuzk.circuits.registry`: key generation's
circuit, no witness needed) with `RecordingCS`, compiles it and writes it atomically; a circuit of 3
or more identical blocks is recorded with one and two blocks only and assembled (`cuzk.r1cs.blocks`),
which is what makes circuits of a hundred million rows buildable (docs/compiled-circuits.md).
`start_build` does that in a spawned process, so the daemon's own threads never wait on it; with a
memory budget it first reserves `build_memory_estimate` of the size the provider states (rows,
variables, blocks, header rows; without evicting anything) and holds it until the builder exits.
`path_for_job` (what the engine calls when it plans a job of a provider whose circuits may be
compiled, `cuzk.engine.compiled_recipe`) gives the ready file and, through `ensure`, starts a build
only when the store was made with `auto_build=True`; otherwise compiled files are used when present
and never made. The store knows no circuit by name: what it needs to know of one
(`cuzk.engine.providers.BuildSize`) comes from the circuit's provider.

Synthesis and device processes load a ready file once per process (`load_verified`, memory-mapped,
every array digest verified) and keep it; a synthesis process that leaves the products to the prover
reads the header alone (`read_checked_header`). A file that fails to load is logged and skipped, and
the partition falls back to the constraint-system path. Files are only ever replaced by
rename, never rewritten in place (a mapped file cut short under a reader would fault it).

Engine status: `to_dict()` is a JSON-ready view (directory, enabled, auto_build, per circuit id the
state, path, error, builder pid, file size and header summary), shown as `compiled_circuits`. The
engine makes one store from `synthesis.compiled` and plans with it.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cuzk.errors import CuzkError

if TYPE_CHECKING:
    from cuzk.engine.providers import BuildSize

log = logging.getLogger("cuzk.engine.compiled")

__all__ = [
    "SUFFIX",
    "CompiledState",
    "CompiledStatus",
    "CompiledStore",
    "build_memory_estimate",
    "load_verified",
    "read_checked_header",
]

SUFFIX = ".cuzk-r1cs"
_LOCK_SUFFIX = ".building"
_FAILED_SUFFIX = ".failed"
#: Peak of recording + compiling (the recorded terms at 12 bytes each, then their int64 columns
#: while compacting), per constraint and per variable; see `build_memory_estimate`.
_BUILD_BYTES_PER_CONSTRAINT = 300
_BUILD_BYTES_PER_VARIABLE = 40
_BUILD_BASE_BYTES = 256 << 20
#: A block-compiled build (`cuzk.r1cs.blocks`) keeps the recordings of the one- and two-block
#: circuits (about three blocks of rows, as numpy CSR arrays) while it writes the compiled arrays of
#: all rows (uint32 columns and row pointers, uint16 coefficient indices: 47 to 67 bytes per row in
#: the circuits measured) and unpacked density masks per variable; measured peaks against this
#: estimate: docs/compiled-circuits.md.
_BLOCK_RECORDED_BYTES_PER_CONSTRAINT = 140
_ASSEMBLED_BYTES_PER_CONSTRAINT = 72
_ASSEMBLED_BYTES_PER_VARIABLE = 8


class CompiledState(StrEnum):
    ABSENT = "absent"
    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"
    STALE = "stale"


@dataclass(frozen=True)
class CompiledStatus:
    """One circuit id's state in a store, as the engine status shows it (`to_dict`)."""

    circuit_id: str
    state: CompiledState
    path: str
    error: str | None = None  #: failed: the build's error; stale: why the file is not used
    builder_pid: int | None = None  #: building
    started_at: float | None = None  #: building: when the build began (Unix time)
    file_bytes: int | None = None  #: ready
    info: dict[str, Any] = field(default_factory=dict)  #: ready: the header summary (counts, nnz, ...)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = self.state.value
        return {k: v for k, v in out.items() if v not in (None, {})}


class _Budget(Protocol):
    """What the store needs of `cuzk.engine.memory.MemoryBudget`."""

    def try_reserve(self, nbytes: int, label: str, *, evict: bool = True) -> Any: ...


def build_memory_estimate(num_constraints: int, num_variables: int, *, blocks: int | None = None,
                          header_rows: int = 0) -> int:
    """Bytes a build needs at its peak, from the circuit's size; an upper bound for every circuit
    measured (docs/compiled-circuits.md, benchmarks/cpu/bench_compile_blocks.py).

    Recorded whole: the recorded terms, then their columns while compacting. A circuit of `blocks`
    identical blocks, 3 or more, is compiled block by block: three blocks recorded, then all rows
    assembled. A large header (`header_rows`) is recorded once, at a whole recording's cost per row.
    """
    from cuzk.groth16.synthesis import MIN_BLOCKS_TO_ASSEMBLE

    if blocks is not None and blocks >= MIN_BLOCKS_TO_ASSEMBLE:
        recorded = 3 * -(-max(num_constraints - header_rows, 0) // blocks)
        return _BUILD_BASE_BYTES + _BUILD_BYTES_PER_CONSTRAINT * header_rows + \
            _BLOCK_RECORDED_BYTES_PER_CONSTRAINT * recorded + \
            _ASSEMBLED_BYTES_PER_CONSTRAINT * num_constraints + _ASSEMBLED_BYTES_PER_VARIABLE * num_variables
    return _BUILD_BASE_BYTES + _BUILD_BYTES_PER_CONSTRAINT * num_constraints + \
        _BUILD_BYTES_PER_VARIABLE * num_variables


# -- the store ----------------------------------------------------------------------------------------

class CompiledStore:
    """A directory of compiled circuits; see the module docstring."""

    def __init__(self, root: str | Path, *, auto_build: bool = False, budget: _Budget | None = None,
                 enabled: bool = True) -> None:
        self.root = Path(root)
        #: False (synthesis.compiled = "off"): jobs are never planned with compiled files, even ready ones.
        self.enabled = enabled
        self.auto_build = auto_build and enabled
        self.budget = budget
        self._lock = threading.Lock()
        self._builders: dict[str, multiprocessing.process.BaseProcess] = {}
        #: circuit id -> the thread that reaps its builder, releases its memory and records the outcome.
        self._watchers: dict[str, threading.Thread] = {}
        self._seen: set[str] = set()
        #: circuit id -> (stat key, status) of the last header read, so polling status is cheap.
        self._header_cache: dict[str, tuple[tuple[int, int, int], CompiledStatus]] = {}
        #: circuit id -> reason the last ensure() could not start a build now (e.g. memory).
        self._waiting: dict[str, str] = {}

    def path(self, circuit_id: str) -> Path:
        _check_id(circuit_id)
        return self.root / f"{circuit_id}{SUFFIX}"

    def _lock_path(self, circuit_id: str) -> Path:
        return self.root / f"{circuit_id}{_LOCK_SUFFIX}"

    def _failed_path(self, circuit_id: str) -> Path:
        return self.root / f"{circuit_id}{_FAILED_SUFFIX}"

    # -- state --------------------------------------------------------------------------------------
    def status(self, circuit_id: str) -> CompiledStatus:
        path = self.path(circuit_id)
        file_status = self._file_status(circuit_id, path)
        if file_status is not None and file_status.state is CompiledState.READY:
            return file_status
        builder = _read_json(self._lock_path(circuit_id))
        if builder is not None and _alive(builder):
            return CompiledStatus(circuit_id, CompiledState.BUILDING, str(path), builder_pid=builder.get("pid"),
                                  started_at=builder.get("started_at"))
        failed = _read_json(self._failed_path(circuit_id))
        if failed is not None:
            return CompiledStatus(circuit_id, CompiledState.FAILED, str(path), error=str(failed.get("error")))
        if file_status is not None:
            return file_status
        waiting = self._waiting.get(circuit_id)
        return CompiledStatus(circuit_id, CompiledState.ABSENT, str(path), error=waiting)

    def _file_status(self, circuit_id: str, path: Path) -> CompiledStatus | None:
        """READY or STALE for an existing file (cached on its inode, size and mtime), else None."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        from cuzk.groth16.synthesis import synthesis_code_digest
        from cuzk.r1cs.compiled_file import CompiledFileError, read_header

        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._header_cache.get(circuit_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            header = read_header(path)
            problem = None
            if header.circuit_id != circuit_id:
                problem = f"{path} holds circuit {header.circuit_id!r}"
            elif header.code_digest != synthesis_code_digest():
                problem = f"{path} was compiled from other synthesis code; it will be rebuilt"
        except CompiledFileError as err:
            header, problem = None, str(err)
        if problem is not None or header is None:
            out = CompiledStatus(circuit_id, CompiledState.STALE, str(path), error=problem)
        else:
            out = CompiledStatus(circuit_id, CompiledState.READY, str(path), file_bytes=st.st_size,
                                 info=header.summary())
        self._header_cache[circuit_id] = (key, out)
        return out

    def statuses(self) -> list[CompiledStatus]:
        """Every circuit id this store has been asked about or holds a file for, sorted."""
        ids = set(self._seen)
        if self.root.is_dir():
            for entry in self.root.iterdir():
                for suffix in (SUFFIX, _LOCK_SUFFIX, _FAILED_SUFFIX):
                    if entry.name.endswith(suffix) and not entry.name.startswith("."):
                        ids.add(entry.name[: -len(suffix)])
        out = []
        for cid in sorted(ids):
            try:
                out.append(self.status(cid))
            except CuzkError:  # a stray file with a name that is no circuit id
                continue
        return out

    def to_dict(self) -> dict[str, Any]:
        """For the engine status: the directory, whether it builds on first use, each circuit."""
        return {"root": str(self.root), "enabled": self.enabled, "auto_build": self.auto_build,
                "circuits": {s.circuit_id: s.to_dict() for s in self.statuses()}}

    def ready_path(self, circuit_id: str) -> str | None:
        """The file to prove `circuit_id` with, when one is ready."""
        self._seen.add(circuit_id)
        status = self.status(circuit_id)
        return status.path if status.state is CompiledState.READY else None

    def path_for_job(self, circuit_id: str, size: BuildSize | None = None) -> str | None:
        """The compiled circuit a job of `circuit_id` is planned with: the ready file, if any (None
        while the store is disabled); on first use, a background build when the store builds
        automatically (`ensure`). Never fails a job: problems are logged."""
        if not self.enabled:
            return None
        try:
            self.ensure(circuit_id, size)
            return self.ready_path(circuit_id)
        except (CuzkError, OSError) as err:
            log.warning("%s: compiled circuits unavailable (%s); synthesizing with the constraint system",
                        circuit_id, err)
            return None

    # -- building -----------------------------------------------------------------------------------
    def ensure(self, circuit_id: str, size: BuildSize | None = None) -> CompiledStatus:
        """On a circuit's first use: start a background build when the store builds
        automatically and there is nothing usable, nothing in progress and no recorded failure."""
        self._seen.add(circuit_id)
        status = self.status(circuit_id)
        if self.auto_build and status.state in (CompiledState.ABSENT, CompiledState.STALE):
            return self.start_build(circuit_id, size)
        return status

    def start_build(self, circuit_id: str, size: BuildSize | None = None) -> CompiledStatus:
        """Build in a spawned process (returns at once). With a budget and a size, the estimate is
        reserved first; if it does not fit now the build is not started (status says why). A large
        circuit's small versions are recorded in parallel (`record_in_parallel`)."""
        self._seen.add(circuit_id)
        with self._lock:
            status = self.status(circuit_id)
            if status.state in (CompiledState.BUILDING, CompiledState.READY):
                return status
            reservation = None
            if self.budget is not None and size is not None:
                need = build_memory_estimate(size.num_constraints, size.num_variables, blocks=size.blocks,
                                             header_rows=size.header_rows)
                try:
                    reservation = self.budget.try_reserve(need, f"compile:{circuit_id}", evict=False)
                except CuzkError as err:  # can never fit: a failure, not a wait
                    self._record_failure(circuit_id, f"building needs about {need:,} bytes of memory: {err}")
                    return self.status(circuit_id)
                if reservation is None:
                    self._waiting[circuit_id] = f"waiting for {need:,} bytes of memory to build"
                    return self.status(circuit_id)
            self._waiting.pop(circuit_id, None)
            if not self._take_lock(circuit_id, os.getpid()):
                _release(reservation)
                return self.status(circuit_id)
            self._failed_path(circuit_id).unlink(missing_ok=True)
            try:
                ctx = multiprocessing.get_context("spawn")
                parallel = record_in_parallel(size.num_constraints if size is not None else None)
                proc = ctx.Process(target=_builder_main, args=(str(self.root), circuit_id, parallel),
                                   name=f"cuzk-compile-{circuit_id}", daemon=True)
                proc.start()
            except BaseException as err:
                self._lock_path(circuit_id).unlink(missing_ok=True)
                _release(reservation)
                self._record_failure(circuit_id, f"could not start the builder: {err}")
                return self.status(circuit_id)
            _write_lock(self._lock_path(circuit_id), proc.pid)
            self._builders[circuit_id] = proc
            watcher = threading.Thread(target=self._watch, args=(circuit_id, proc, reservation), daemon=True,
                                       name=f"cuzk-compile-watch-{circuit_id}")
            self._watchers[circuit_id] = watcher
            watcher.start()
            log.info("building compiled circuit %s in process %d", circuit_id, proc.pid)
            return self.status(circuit_id)

    def _watch(self, circuit_id: str, proc: multiprocessing.process.BaseProcess, reservation: Any) -> None:
        proc.join()
        try:
            if proc.exitcode != 0 and not self._failed_path(circuit_id).exists():
                # The builder died without recording why (killed, out of memory): record it here.
                self._record_failure(circuit_id, f"the builder process {proc.pid} exited with code {proc.exitcode}")
            lock = _read_json(self._lock_path(circuit_id))
            if lock is not None and lock.get("pid") == proc.pid:
                self._lock_path(circuit_id).unlink(missing_ok=True)
        finally:
            _release(reservation)
            with self._lock:
                if self._builders.get(circuit_id) is proc:
                    del self._builders[circuit_id]
            state = self.status(circuit_id)
            log.info("compiled circuit %s: %s%s", circuit_id, state.state.value,
                     f" ({state.error})" if state.error else "")

    def build(self, circuit_id: str, *, parallel: bool = False) -> Path:
        """Build now, in this process (blocking); raises the build's error. Replaces any file.
        `parallel`: record a block circuit's two small versions in two processes (`record_in_parallel`)."""
        self._seen.add(circuit_id)
        if not self._take_lock(circuit_id, os.getpid()):
            raise CuzkError(f"compiled circuit {circuit_id} is being built by process "
                            f"{(_read_json(self._lock_path(circuit_id)) or {}).get('pid')}")
        try:
            self._failed_path(circuit_id).unlink(missing_ok=True)
            return _build(self.root, circuit_id, parallel)
        except BaseException as err:
            self._record_failure(circuit_id, f"{type(err).__name__}: {err}")
            raise
        finally:
            self._lock_path(circuit_id).unlink(missing_ok=True)

    def wait(self, circuit_id: str, timeout: float | None = None) -> CompiledStatus:
        """Wait for this store's builder of `circuit_id` (if any) to finish; the status after."""
        # The watcher, not the process: it finishes after the builder exited and its memory reservation
        # was released (joining the process from a second thread races the watcher's own join).
        watcher = self._watchers.get(circuit_id)
        if watcher is not None:
            watcher.join(timeout)
        return self.status(circuit_id)

    def reset(self, circuit_id: str) -> None:
        """Forget a failed build so that `ensure` may try again."""
        self._failed_path(circuit_id).unlink(missing_ok=True)
        self._waiting.pop(circuit_id, None)

    def close(self, timeout: float = 5.0) -> None:
        """Stop this store's builders (a daemon shutting down): their locks and reservations go."""
        for circuit_id, proc in list(self._builders.items()):
            if proc.is_alive():
                proc.terminate()
            proc.join(timeout)
            self.wait(circuit_id, 0)

    def _take_lock(self, circuit_id: str, pid: int) -> bool:
        """Create `<id>.building` exclusively; a lock whose process is gone is taken over."""
        self.root.mkdir(parents=True, exist_ok=True)
        lock = self._lock_path(circuit_id)
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = _read_json(lock)
                if holder is not None and _alive(holder):
                    return False
                lock.unlink(missing_ok=True)  # left by a dead builder
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(_lock_record(pid), f)
            return True
        return False

    def _record_failure(self, circuit_id: str, error: str) -> None:
        _record_failure(self.root, circuit_id, error)


# -- helpers shared with the builder process -------------------------------------------------------

_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def _check_id(circuit_id: str) -> None:
    if not circuit_id or not set(circuit_id) <= _ID_CHARS or circuit_id.startswith("."):
        raise CuzkError(f"{circuit_id!r} is not a circuit id (letters, digits, '-', '_', '.')")


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _lock_record(pid: int) -> dict[str, Any]:
    return {"pid": pid, "process_start": _process_start(pid), "started_at": time.time()}


def _write_lock(path: Path, pid: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(_lock_record(pid)))
    os.replace(tmp, path)


def _alive(record: dict[str, Any]) -> bool:
    """The lock's process still runs (same pid and the same start time: not a reused pid)."""
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    start = _process_start(pid)
    recorded = record.get("process_start")
    return start is not None and (recorded is None or abs(start - recorded) < 1.0)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _release(reservation: Any) -> None:
    if reservation is not None:
        reservation.release()


def _record_failure(root: Path, circuit_id: str, error: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{circuit_id}{_FAILED_SUFFIX}"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"error": error, "at": time.time()}))
    os.replace(tmp, path)


def _build(root: Path, circuit_id: str, parallel: bool) -> Path:
    from cuzk.circuits.registry import lookup
    from cuzk.groth16.synthesis import compile_circuit
    from cuzk.r1cs.compiled_file import write_compiled

    start = time.monotonic()
    compiled = compile_circuit(lookup(circuit_id).blank(), circuit_id, parallel=parallel)
    path = write_compiled(compiled, root / f"{circuit_id}{SUFFIX}")
    log.info("compiled %s: %d constraints, %d entries, %d coefficients, %.1f MB in %.1f s", circuit_id,
             compiled.num_constraints, compiled.nnz, compiled.coeff_table.shape[0], compiled.nbytes / 1e6,
             time.monotonic() - start)
    return path


#: From this many constraints on, with 4 or more cores, a block circuit's two small recordings run in
#: two processes (the process start costs ~2 s; a 130M-row circuit's one-block recording ~40 s).
PARALLEL_RECORDING_MIN_CONSTRAINTS = 10_000_000


def record_in_parallel(num_constraints: int | None) -> bool:
    """Whether to record a circuit of `num_constraints` rows (None: not known) in two processes."""
    return (os.cpu_count() or 1) >= 4 and num_constraints is not None and \
        num_constraints >= PARALLEL_RECORDING_MIN_CONSTRAINTS


def _builder_main(root: str, circuit_id: str, parallel: bool = False) -> None:
    """Entry point of a spawned builder: build, or record why not; the parent removes the lock."""
    try:
        _build(Path(root), circuit_id, parallel)
    except BaseException as err:
        _record_failure(Path(root), circuit_id, f"{type(err).__name__}: {err}")
        raise SystemExit(1) from None


# -- the processes that synthesize and prove ------------------------------------------------------------

_LOADED: dict[tuple[str, str], tuple[tuple[int, int, int], Any]] = {}
_LOADED_LOCK = threading.Lock()


def load_verified(path: str, circuit_id: str) -> Any:
    """The compiled circuit at `path` for `circuit_id`, loaded once per process (memory-mapped and
    fully verified the first time, reused while the file is unchanged); None, logged, when it is
    unusable, so that the caller synthesizes with the constraint system instead."""
    from cuzk.groth16.synthesis import synthesis_code_digest
    from cuzk.r1cs.compiled_file import load_compiled

    try:
        st = os.stat(path)
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        with _LOADED_LOCK:
            cached = _LOADED.get((path, circuit_id))
            if cached is not None and cached[0] == key:
                return cached[1]
            compiled = load_compiled(path, expect_circuit_id=circuit_id, expect_code_digest=synthesis_code_digest(),
                                     verify=True)
            _LOADED[(path, circuit_id)] = (key, compiled)
            return compiled
    except (OSError, CuzkError) as err:
        log.warning("compiled circuit %s not used: %s", circuit_id, err)
        with _LOADED_LOCK:
            _LOADED.pop((path, circuit_id), None)
        return None


def read_checked_header(path: str, circuit_id: str) -> Any:
    """The header of the compiled circuit at `path` (`CompiledHeader`: counts, `check_witness`), checked
    to be `circuit_id`'s from this synthesis code, for a synthesis process whose prover evaluates a, b,
    c: it never reads the matrices, so it neither maps nor verifies them (a 130M-row circuit: 6.1 GB,
    13 s of hashing per process); the prover's process loads and verifies them (`load_verified`). None,
    logged, when the file is unusable."""
    from cuzk.groth16.synthesis import synthesis_code_digest
    from cuzk.r1cs.compiled_file import read_header

    try:
        header = read_header(path)
        header.check_expected(circuit_id, synthesis_code_digest())
        return header
    except (OSError, CuzkError) as err:
        log.warning("compiled circuit %s not used: %s", circuit_id, err)
        return None
