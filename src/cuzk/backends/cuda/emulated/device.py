"""The emulated cards, their memory, streams and events (docs/gpu.md, "The emulated device").

A card has a capacity that every process using it shares: each process publishes the bytes its
pool holds from the "driver" in a file of the card's room (a directory), and `memGetInfo` reads
them all, so two device processes on one card see each other as they would on a real one. Within
a process a `Pool` behaves as CuPy's: blocks are carved out of arenas, freed blocks stay cached
for allocations on the stream that freed them, a limit counts cached blocks too, and on running
out of the card it releases its cached blocks once before it raises `OutOfMemoryError`.

A `Stream` runs its work on a thread of its own, in order, later than it was queued (`DELAY_ENV`
sets a fixed or random delay before each item), so host code that reads or reuses memory before
the work it depends on has run gets wrong bytes, as on a GPU. Failures inside queued work are
raised at the next synchronisation of that stream or device, once.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import logging
import os
import random
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil

log = logging.getLogger("cuzk.backends.cuda.emulated")

#: The emulated cards: their capacities, comma-separated ("4GiB,2GiB": cards 0 and 1).
CARDS_ENV = "CUZK_EMULATED_GPUS"
#: The directory where processes sharing the cards publish what they hold (made and exported on
#: first use when unset, so child processes share it).
ROOM_ENV = "CUZK_EMULATED_GPU_ROOM"
#: Before each item a stream runs: seconds ("0.002"), or "random:MAX[:SEED]".
DELAY_ENV = "CUZK_EMULATED_GPU_DELAY"
#: "N": the N-th device allocation of each process (from 1) fails once with OutOfMemoryError; a path:
#: once that file appears, the allocation after the number of allocations it holds (empty: 0) fails,
#: and the file is removed (one failure, in whichever process on the cards takes the file first, at a
#: moment the test chooses).
OOM_ENV = "CUZK_EMULATED_GPU_OOM"
#: Most bytes of pinned host memory a process may hold ("1GiB"); unset: no limit.
PINNED_ENV = "CUZK_EMULATED_PINNED_LIMIT"

ROUND = 512  # CuPy's pool rounds every request up to this
ARENA_FILL = 0xA5  # fresh device memory: never zeros, so a read before any write shows
NAME = "cuzk emulated CUDA device"


class CUDARuntimeError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"cudaError {status}: {message}")
        self.status = status


class CUDADriverError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"CUresult {status}: {message}")
        self.status = status


class OutOfMemoryError(MemoryError):
    def __init__(self, size: int, total: int, limit: int = 0) -> None:
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes"
                         + (f", limit set to: {limit:,} bytes" if limit else "") + ").")
        self.size, self.total, self.limit = size, total, limit


def parse_size(text: str) -> int:
    from cuzk.config.values import parse_size as parse

    return parse(text.strip(), what=CARDS_ENV)


def card_sizes() -> list[int]:
    """The emulated cards' capacities from `CARDS_ENV` (empty: emulation is off)."""
    text = os.environ.get(CARDS_ENV, "").strip()
    return [parse_size(part) for part in text.split(",") if part.strip()] if text else []


ROOM_PREFIX = "cuzk-emulated-gpus-"
#: A room's maker, "pid create_time", written once the room is made.
ROOM_OWNER = "owner"


def _room() -> Path:
    path = os.environ.get(ROOM_ENV)
    if not path:
        path = str(make_room())
        os.environ[ROOM_ENV] = path  # inherited by child processes: they share the cards
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def make_room() -> Path:
    """A room of this process's own in the temporary directory, removed when it exits. Made here, so
    removed here: a process that names the cards without a room (a test session on CUZK_EMULATED_GPUS
    alone, a daemon with `gpus.emulate`) would otherwise leave one each run. One killed (SIGKILL) runs no
    exit handler: the rooms of makers that are gone are swept first."""
    sweep_rooms()
    path = Path(tempfile.mkdtemp(prefix=ROOM_PREFIX))
    (path / ROOM_OWNER).write_text(f"{os.getpid()} {psutil.Process().create_time()!r}\n")
    atexit.register(_remove_room, str(path), os.getpid())
    return path


def sweep_rooms() -> list[Path]:
    """Remove the rooms in the temporary directory whose maker is gone (dead, a zombie, or its pid now
    another process's); those without an owner file (being made, or made elsewhere) are left."""
    removed = []
    for room in Path(tempfile.gettempdir()).glob(ROOM_PREFIX + "*"):
        try:
            pid, created = (room / ROOM_OWNER).read_text().split()
            maker_alive = _holder_alive(int(pid), float(created))
        except (OSError, ValueError):
            continue
        if not maker_alive:
            shutil.rmtree(room, ignore_errors=True)
            removed.append(room)
    return removed


def _remove_room(path: str, maker: int) -> None:
    if os.getpid() == maker:  # not in a forked child that inherited the handler
        shutil.rmtree(path, ignore_errors=True)


def _holder_alive(pid: int, published_at: float) -> bool:
    """Whether the process that published a holding file is alive: a killed one not yet reaped (a
    zombie) holds nothing, nor does a later process that was given its pid (started after the file
    was last written)."""
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and p.create_time() <= published_at + 1.0
    except psutil.NoSuchProcess:
        return False


def holdings(card: Path) -> dict[int, int]:
    """Bytes held on a card (its directory in a room) by each live process; a dead one's file is removed."""
    out = {}
    for f in card.iterdir():
        if not f.name.isdigit():
            continue
        pid = int(f.name)
        try:
            if pid != os.getpid() and not _holder_alive(pid, f.stat().st_mtime):
                f.unlink(missing_ok=True)
                continue
            out[pid] = int(f.read_text() or 0)
        except (OSError, ValueError):  # gone meanwhile, or being replaced
            continue
    return out


class Card:
    """One emulated GPU as this process sees it: its capacity and what every process holds of it."""

    def __init__(self, ordinal: int, capacity: int) -> None:
        self.ordinal, self.capacity = ordinal, capacity
        self.dir = _room() / f"card{ordinal}"
        self.dir.mkdir(exist_ok=True)
        self._mine = self.dir / str(os.getpid())

    def publish(self, nbytes: int) -> None:
        tmp = self._mine.with_suffix(".tmp")
        tmp.write_text(str(nbytes))
        os.replace(tmp, self._mine)

    def held(self) -> int:
        """Bytes held on this card by every live process."""
        return sum(holdings(self.dir).values())

    def free(self) -> int:
        return max(0, self.capacity - self.held())


# -- streams and events ---------------------------------------------------------------------------

class _Mark:
    """One recording of an event: set when its stream reaches it, with the time it did."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.at = 0.0

    def set(self) -> None:
        self.at = time.perf_counter()
        self.reached.set()


class Event:
    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
        self._mark: _Mark | None = None  # never recorded: complete, as in CUDA

    def record(self, stream: Stream | None = None) -> None:
        stream = stream if stream is not None else current_stream()
        self._mark = _Mark()
        stream._put(("record", self._mark))

    @property
    def done(self) -> bool:
        return self._mark is None or self._mark.reached.is_set()

    def synchronize(self) -> None:
        if self._mark is not None:
            self._mark.reached.wait()


def get_elapsed_time(start: Event, end: Event) -> float:
    """Milliseconds between two completed events."""
    for ev in (start, end):
        if ev._mark is None or not ev._mark.reached.is_set():
            raise CUDARuntimeError(600, "cudaErrorNotReady: an event of get_elapsed_time has not completed")
    return (end._mark.at - start._mark.at) * 1e3  # type: ignore[union-attr]


def _delay() -> Callable[[], float]:
    text = os.environ.get(DELAY_ENV, "").strip()
    if not text:
        return lambda: 0.0
    if text.startswith("random:"):
        parts = text.split(":")
        top = float(parts[1])
        rng = random.Random(int(parts[2]) if len(parts) > 2 else None)
        lock = threading.Lock()

        def pick() -> float:
            with lock:
                return rng.uniform(0.0, top)
        return pick
    value = float(text)
    return lambda: value


_STREAM_IDS = itertools.count(1)
_STREAMS: dict[int, weakref.ReferenceType[Stream]] = {}


class _Queue:
    """A stream's work, run in order on one thread; kept apart from the `Stream` so that the thread
    does not keep its stream alive."""

    def __init__(self, device: DeviceState, name: str) -> None:
        self.device, self.name = device, name
        self.items: collections.deque[tuple[Any, ...]] = collections.deque()
        self.cond = threading.Condition()
        self.busy = False
        self.failure: BaseException | None = None
        self.delay = _delay()
        threading.Thread(target=self._run, name=f"cuzk-emu-{name}", daemon=True).start()

    def put(self, item: tuple[Any, ...]) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.items:
                    self.cond.wait()
                item = self.items.popleft()
                self.busy = True
            try:
                if item[0] == "stop":
                    return
                pause = self.delay()
                if pause:
                    time.sleep(pause)
                if item[0] == "record":
                    item[1].set()
                elif item[0] == "wait":
                    item[1].reached.wait()
                elif self.failure is None:  # ("run", fn, what)
                    try:
                        item[1]()
                    except BaseException as exc:  # raised at the next synchronisation
                        log.error("emulated device %d, stream %s: %s failed: %s", self.device.ordinal, self.name,
                                  item[2], exc)
                        self.failure = exc
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def drain(self) -> None:
        with self.cond:
            while self.items or self.busy:
                self.cond.wait()
            failure, self.failure = self.failure, None
        if failure is not None:
            if isinstance(failure, CUDARuntimeError | CUDADriverError | OutOfMemoryError):
                raise failure
            raise CUDARuntimeError(999, f"work queued on stream {self.name} failed: {failure}") from failure

    def idle(self) -> bool:
        with self.cond:
            return not self.items and not self.busy


class Stream:
    """An ordered queue of device work (see the module docstring); `ptr` names it to the runtime."""

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int = 0) -> None:
        self.device_id = current_device_id()
        state = device_state(self.device_id)
        self.ptr = 0 if null else next(_STREAM_IDS)
        self._q = _Queue(state, "null" if null else str(self.ptr))
        state.queues.add(self._q)
        if not null:
            _STREAMS[self.ptr] = weakref.ref(self)
            weakref.finalize(self, _retire, self.ptr, self._q, state)

    def _put(self, item: tuple[Any, ...]) -> None:
        self._q.put(item)

    def launch(self, fn: Callable[[], None], what: str) -> None:
        """Queue `fn` (host code over plain arrays only: never anything that synchronises)."""
        self._q.put(("run", fn, what))

    def record(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        if event._mark is not None and not event._mark.reached.is_set():
            self._q.put(("wait", event._mark))

    def synchronize(self) -> None:
        self._q.drain()

    @property
    def done(self) -> bool:
        return self._q.idle()

    def use(self) -> Stream:
        _local_streams(self.device_id).append(self)
        return self

    def __enter__(self) -> Stream:
        return self.use()

    def __exit__(self, *exc: object) -> None:
        stack = _local_streams(self.device_id)
        if stack and stack[-1] is self:
            stack.pop()


def _retire(ptr: int, queue: _Queue, state: DeviceState) -> None:
    _STREAMS.pop(ptr, None)
    queue.put(("stop",))
    state.queues.discard(queue)


def stream_by_ptr(ptr: int) -> Stream:
    if ptr == 0:
        return device_state(current_device_id()).null
    ref = _STREAMS.get(ptr)
    stream = ref() if ref is not None else None
    if stream is None:
        raise CUDARuntimeError(400, f"cudaErrorInvalidResourceHandle: no stream {ptr:#x}")
    return stream


# -- memory -----------------------------------------------------------------------------------------

class _Block:
    __slots__ = ("arena", "free", "offset", "size", "stream")

    def __init__(self, arena: _Arena, offset: int, size: int, stream: int) -> None:
        self.arena, self.offset, self.size, self.free, self.stream = arena, offset, size, False, stream


class _Arena:
    """One allocation from the card ("cudaMalloc"), carved into blocks."""

    def __init__(self, size: int) -> None:
        self.buf = np.full(size, ARENA_FILL, dtype=np.uint8)
        self.addr = int(self.buf.ctypes.data)
        self.size = size
        self.blocks: list[_Block] = []


class MemoryPointer:
    """A block in use; it goes back to the pool's cache (for its stream) when this is collected."""

    def __init__(self, pool: Pool, block: _Block | None, size: int) -> None:
        self.device_id = pool.device.ordinal
        self.size = size
        self.ptr = block.arena.addr + block.offset if block is not None else 0
        self.buf = block.arena.buf[block.offset: block.offset + size] if block is not None \
            else np.empty(0, dtype=np.uint8)
        if block is not None:
            weakref.finalize(self, pool._release, block)


class Pool:
    """CuPy's SingleDeviceMemoryPool over an emulated card (the module docstring)."""

    def __init__(self, device: DeviceState) -> None:
        self.device = device
        self.arenas: list[_Arena] = []
        self.lock = threading.RLock()
        #: Blocks whose arrays were collected. A finalizer may run anywhere, even inside the pool's own
        #: code under its lock, so it only queues the block; `_collect` returns them under the lock.
        self._freed: collections.deque[_Block] = collections.deque()
        self.limit = 0
        self._used = 0
        self._total = 0

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        if fraction is not None:
            size = int(self.device.card.capacity * fraction)
        self.limit = int(size or 0)

    def get_limit(self) -> int:
        return self.limit

    def used_bytes(self) -> int:
        with self.lock:
            self._collect()
            return self._used

    def total_bytes(self) -> int:
        with self.lock:
            self._collect()
            return self._total

    def free_bytes(self) -> int:
        with self.lock:
            self._collect()
            return self._total - self._used

    def n_free_blocks(self) -> int:
        with self.lock:
            self._collect()
            return sum(1 for a in self.arenas for b in a.blocks if b.free)

    def malloc(self, size: int) -> MemoryPointer:
        size = int(size)
        if size == 0:
            return MemoryPointer(self, None, 0)
        need = -(-size // ROUND) * ROUND
        self.device.count_allocation(size)
        stream = current_stream().ptr
        for attempt in (0, 1):
            with self.lock:
                self._collect()
                block = self._cached(need, stream)
                if block is None:
                    if self.limit and self._total + need > self.limit:
                        raise OutOfMemoryError(size, self._total, self.limit)
                    if self.device.card.free() >= need:
                        arena = _Arena(need)
                        block = _Block(arena, 0, need, stream)
                        arena.blocks.append(block)
                        self.arenas.append(arena)
                        self._total += need
                        self.device.card.publish(self._total)
                if block is not None:
                    self._used += block.size
                    return MemoryPointer(self, block, size)
            if attempt == 0:  # as CuPy: the cached blocks go back to the card, then once more
                self.free_all_blocks()
        raise OutOfMemoryError(size, self._total, self.limit)

    def _cached(self, need: int, stream: int) -> _Block | None:
        """The smallest cached block of `stream` that holds `need` bytes, split to size."""
        best = None
        for arena in self.arenas:
            for b in arena.blocks:
                if b.free and b.stream == stream and b.size >= need and (best is None or b.size < best.size):
                    best = b
        if best is None:
            return None
        if best.size > need:
            rest = _Block(best.arena, best.offset + need, best.size - need, stream)
            rest.free = True
            blocks = best.arena.blocks
            blocks.insert(blocks.index(best) + 1, rest)
            best.size = need
        best.free = False
        return best

    def _release(self, block: _Block) -> None:
        self._freed.append(block)

    def _collect(self) -> None:
        """Return the queued blocks to the cache (the caller holds the lock)."""
        while self._freed:
            block = self._freed.popleft()
            self._used -= block.size
            block.free = True
            blocks = block.arena.blocks
            k = blocks.index(block)
            for j in (k + 1, k):  # merge with free neighbours of the same stream
                if 0 < j < len(blocks) and blocks[j].free and blocks[j - 1].free \
                        and blocks[j].stream == blocks[j - 1].stream:
                    blocks[j - 1].size += blocks[j].size
                    del blocks[j]

    def free_all_blocks(self, stream: Any = None) -> None:
        """Return the arenas with no block in use to the card, once this process's queued work has run
        (cudaFree waits for the device)."""
        self.device.synchronize(raise_failures=False)
        with self.lock:
            self._collect()
            keep = [a for a in self.arenas if not all(b.free for b in a.blocks)]
            self._total -= sum(a.size for a in self.arenas if a not in keep)
            self.arenas = keep
            self.device.card.publish(self._total)

    def find(self, addr: int, size: int) -> _Arena | None:
        """The arena holding [addr, addr + size), if any."""
        with self.lock:
            self._collect()
            for a in self.arenas:
                if a.addr <= addr and addr + size <= a.addr + a.size:
                    return a
        return None


class DeviceState:
    """What this process has of one emulated card: its pool, its streams, its allocation count."""

    def __init__(self, ordinal: int, capacity: int) -> None:
        self.ordinal = ordinal
        self.card = Card(ordinal, capacity)
        self.pool = Pool(self)
        self.queues: weakref.WeakSet[_Queue] = weakref.WeakSet()
        self.allocations = 0
        oom = os.environ.get(OOM_ENV, "").strip()
        self.fail_at = int(oom) if oom.isdigit() else 0
        self.trigger = Path(oom) if oom and not oom.isdigit() else None
        self.skip = -1  # allocations still to pass once the trigger was taken
        self.null = Stream.__new__(Stream)
        self.null.device_id, self.null.ptr = ordinal, 0
        self.null._q = _Queue(self, "null")
        self.queues.add(self.null._q)

    def count_allocation(self, size: int) -> None:
        self.allocations += 1
        fail = self.allocations == self.fail_at
        if self.trigger is not None and self.skip < 0 and self.trigger.exists():
            try:
                text = self.trigger.read_text().strip()
                self.trigger.unlink()
                self.skip = int(text or 0)
            except (FileNotFoundError, ValueError):  # another process took it; a bad count: fail now
                self.skip = 0 if self.trigger.exists() else -1
        if self.skip >= 0:
            fail, self.skip = self.skip == 0, self.skip - 1
        if fail:
            log.warning("emulated device %d: out-of-memory error injected (%s)", self.ordinal, OOM_ENV)
            raise OutOfMemoryError(size, self.pool.total_bytes(), self.pool.limit)

    def inject_oom(self, after: int = 1) -> None:
        """The `after`-th allocation from now fails once with OutOfMemoryError (tests)."""
        self.fail_at = self.allocations + after

    def synchronize(self, raise_failures: bool = True) -> None:
        first: BaseException | None = None
        for q in list(self.queues):
            try:
                q.drain()
            except BaseException as exc:
                first = first or exc
        if first is not None and raise_failures:
            raise first


_STATES: dict[int, DeviceState] = {}
_STATES_LOCK = threading.Lock()


def device_count() -> int:
    return len(card_sizes())


def device_state(ordinal: int) -> DeviceState:
    with _STATES_LOCK:
        state = _STATES.get(ordinal)
        if state is None:
            sizes = card_sizes()
            if not 0 <= ordinal < len(sizes):
                raise CUDARuntimeError(101, f"cudaErrorInvalidDevice: device {ordinal} (emulated cards: "
                                       f"{len(sizes)}, {CARDS_ENV}={os.environ.get(CARDS_ENV, '')!r})")
            state = _STATES[ordinal] = DeviceState(ordinal, sizes[ordinal])
        return state


_local = threading.local()


def current_device_id() -> int:
    stack = getattr(_local, "devices", None)
    return stack[-1] if stack else 0


def _local_streams(device_id: int) -> list[Stream]:
    streams = getattr(_local, "streams", None)
    if streams is None:
        streams = _local.streams = {}
    return streams.setdefault(device_id, [])


def current_stream() -> Stream:
    device_id = current_device_id()
    stack = _local_streams(device_id)
    return stack[-1] if stack else device_state(device_id).null


class Device:
    def __init__(self, device: int | None = None) -> None:
        self.id = current_device_id() if device is None else int(device)
        device_state(self.id)

    def __enter__(self) -> Device:
        self.use()
        return self

    def use(self) -> None:
        stack = getattr(_local, "devices", None)
        if stack is None:
            stack = _local.devices = []
        stack.append(self.id)

    def __exit__(self, *exc: object) -> None:
        _local.devices.pop()

    def synchronize(self) -> None:
        device_state(self.id).synchronize()


def mem_get_info() -> tuple[int, int]:
    card = device_state(current_device_id()).card
    return card.free(), card.capacity


def device_properties(ordinal: int) -> dict[str, Any]:
    card = device_state(ordinal).card
    return {"name": f"{NAME} {ordinal}".encode(), "totalGlobalMem": card.capacity, "multiProcessorCount": 2,
            "major": 9, "minor": 0, "clockRate": 1_000_000}


def reset() -> None:
    """Forget this process's cards (their queued work run first), so that the next use reads
    `CARDS_ENV` again: for tests that change the cards."""
    with _STATES_LOCK:
        states = list(_STATES.values())
        _STATES.clear()
    for state in states:
        state.synchronize(raise_failures=False)
        state.card._mine.unlink(missing_ok=True)
    _local.__dict__.clear()
