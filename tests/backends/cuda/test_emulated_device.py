"""The emulated CUDA device (cuzk.backends.cuda.emulated): memory that is counted and runs out as a
card's does, streams that run later than their work is queued, and copies from pinned memory that
fail when the host rewrote the buffer first."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from cuzk.backends.cuda import runtime
from cuzk.backends.cuda.emulated import device as emu
from cuzk.backends.cuda.module import kernel_source

MIB = 1 << 20


@pytest.fixture
def cards(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """Emulated cards of the sizes given, in a room of this test's own; forgotten afterwards."""
    def make(*sizes: str, delay: str = "") -> object:
        emu.reset()
        monkeypatch.setenv(emu.CARDS_ENV, ",".join(sizes))
        monkeypatch.setenv(emu.ROOM_ENV, str(tmp_path / "room"))
        monkeypatch.setenv(emu.DELAY_ENV, delay)
        return runtime.get_cupy()
    yield make
    emu.reset()


def test_allocations_count_against_the_card_and_mem_get_info_tells_the_truth(cards) -> None:
    cp = cards("64MiB", "32MiB")
    assert cp.cuda.runtime.getDeviceCount() == 2
    free0, total = cp.cuda.runtime.memGetInfo()
    assert (free0, total) == (64 * MIB, 64 * MIB)
    a = cp.empty(10 * MIB, dtype=cp.uint8)
    pool = cp.get_default_memory_pool()
    assert pool.used_bytes() == 10 * MIB and cp.cuda.runtime.memGetInfo()[0] == 54 * MIB
    del a  # back to the pool's cache: still held from the card
    assert pool.used_bytes() == 0 and pool.free_bytes() == 10 * MIB and cp.cuda.runtime.memGetInfo()[0] == 54 * MIB
    b = cp.empty(4 * MIB, dtype=cp.uint8)  # carved out of the cached block
    assert pool.total_bytes() == 10 * MIB
    del b
    pool.free_all_blocks()
    assert pool.total_bytes() == 0 and cp.cuda.runtime.memGetInfo()[0] == 64 * MIB
    with cp.cuda.Device(1):
        assert cp.cuda.runtime.memGetInfo() == (32 * MIB, 32 * MIB)
        with pytest.raises(cp.cuda.memory.OutOfMemoryError, match="Out of memory allocating"):
            cp.empty(33 * MIB, dtype=cp.uint8)


def test_a_full_card_releases_cached_blocks_before_it_raises(cards) -> None:
    cp = cards("16MiB")
    a = cp.empty(12 * MIB, dtype=cp.uint8)
    del a
    b = cp.empty(14 * MIB, dtype=cp.uint8)  # the 12 MiB cached block goes back to the card first
    assert cp.get_default_memory_pool().total_bytes() == 14 * MIB
    with pytest.raises(cp.cuda.memory.OutOfMemoryError):
        cp.empty(4 * MIB, dtype=cp.uint8)
    del b


def test_the_pool_limit_counts_cached_blocks_as_cupy_does(cards) -> None:
    cp = cards("64MiB")
    pool = cp.get_default_memory_pool()
    pool.set_limit(size=8 * MIB)
    with cp.cuda.Stream(non_blocking=True):
        a = cp.empty(6 * MIB, dtype=cp.uint8)
        del a  # cached for that stream
    with pytest.raises(cp.cuda.memory.OutOfMemoryError, match="limit set to"):
        cp.empty(6 * MIB, dtype=cp.uint8)  # another stream: the cached block is not reused, and counts
    pool.free_all_blocks()
    cp.empty(6 * MIB, dtype=cp.uint8)


def _child_holding_20mib() -> subprocess.Popen:
    """A process on the same emulated card holding 20 MiB until a line comes on its stdin."""
    code = ("import sys\nfrom cuzk.backends.cuda import runtime\ncp = runtime.get_cupy()\n"
            "a = cp.empty(20 << 20, dtype=cp.uint8)\nprint('held', flush=True)\nsys.stdin.readline()\n")
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=os.environ.copy())


def test_processes_on_one_card_see_each_others_memory(cards) -> None:
    cp = cards("64MiB")
    child = _child_holding_20mib()
    try:
        assert child.stdout.readline().strip() == "held"
        assert cp.cuda.runtime.memGetInfo()[0] == 44 * MIB
    finally:
        child.communicate("\n", timeout=30)
    assert cp.cuda.runtime.memGetInfo()[0] == 64 * MIB  # a process that exited holds nothing


def test_a_killed_process_holds_nothing_even_before_it_is_reaped(cards) -> None:
    cp = cards("64MiB")
    child = _child_holding_20mib()
    try:
        assert child.stdout.readline().strip() == "held"
        assert cp.cuda.runtime.memGetInfo()[0] == 44 * MIB
        child.kill()  # a device process killed by SIGKILL, its parent not yet waiting for it: a zombie
        give_up = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < give_up:
            time.sleep(0.02)
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        assert cp.cuda.runtime.memGetInfo()[0] == 64 * MIB
    finally:
        child.kill()
        child.wait(10)


def test_a_holding_file_older_than_the_process_of_its_pid_holds_nothing(cards, tmp_path) -> None:
    cp = cards("64MiB")
    cp.cuda.runtime.memGetInfo()  # makes the card's directory
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        held = tmp_path / "room" / "card0" / str(other.pid)
        held.write_text(str(20 * MIB))
        assert cp.cuda.runtime.memGetInfo()[0] == 44 * MIB  # written after the process started: its own
        held.write_text(str(20 * MIB))
        hour_ago = time.time() - 3600
        os.utime(held, (hour_ago, hour_ago))  # a dead process's file, its pid given to a later one
        assert cp.cuda.runtime.memGetInfo()[0] == 64 * MIB and not held.exists()
    finally:
        other.kill()
        other.wait(10)


def test_a_process_that_made_its_own_room_removes_it_when_it_exits() -> None:
    env = {**os.environ, emu.CARDS_ENV: "64MiB"}
    env.pop(emu.ROOM_ENV, None)
    code = ("import os\nfrom cuzk.backends.cuda import runtime\ncp = runtime.get_cupy()\n"
            "a = cp.empty(1 << 20, dtype=cp.uint8)\nprint(os.environ['CUZK_EMULATED_GPU_ROOM'])\n")
    room = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()
    assert room and not os.path.exists(room)


def test_the_room_of_a_killed_maker_is_swept_by_the_next_one(tmp_path) -> None:
    """A process killed by SIGKILL runs no exit handler: its room stays until the next process that
    makes one sweeps it. Rooms of live makers, and rooms without an owner file, are left."""
    import signal
    import tempfile
    from pathlib import Path

    env = {**os.environ, emu.CARDS_ENV: "64MiB"}
    env.pop(emu.ROOM_ENV, None)
    code = ("import os, sys, time\nfrom cuzk.backends.cuda import runtime\ncp = runtime.get_cupy()\n"
            "a = cp.empty(1 << 20, dtype=cp.uint8)\nprint(os.environ['CUZK_EMULATED_GPU_ROOM'], flush=True)\n"
            "time.sleep(60)\n")
    bare = Path(tempfile.mkdtemp(prefix=emu.ROOM_PREFIX))  # no owner file: not for a sweep to judge
    maker = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        killed = Path(maker.stdout.readline().strip())
        assert (killed / emu.ROOM_OWNER).read_text().split()[0] == str(maker.pid)
        live = emu.make_room()  # this process's own, alive
        assert killed not in emu.sweep_rooms() and killed.exists()  # its maker is alive
        maker.send_signal(signal.SIGKILL)
        maker.wait(10)
        assert killed.exists()
        assert killed in emu.sweep_rooms()
        assert not killed.exists() and live.exists() and bare.exists()
    finally:
        maker.kill()
        maker.wait(10)
        bare.rmdir()


def test_an_injected_out_of_memory_error_fails_one_allocation(cards) -> None:
    cp = cards("64MiB")
    emu.device_state(0).inject_oom(after=2)
    cp.empty(16, dtype=cp.uint8)
    with pytest.raises(cp.cuda.memory.OutOfMemoryError):
        cp.empty(16, dtype=cp.uint8)
    cp.empty(16, dtype=cp.uint8)


def test_stream_work_runs_later_in_order_and_events_mark_it(cards) -> None:
    cp = cards("64MiB", delay="0.05")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        a = cp.zeros(4, dtype=cp.uint32)
        before = stream.record()
        a[...] = 0  # host work on device data waits for the stream first
    ran: list[int] = []
    stream.launch(lambda: ran.append(1), "first")
    stream.launch(lambda: ran.append(2), "second")
    after = stream.record()
    assert not after.done and ran == []
    after.synchronize()
    assert ran == [1, 2] and before.done
    assert cp.cuda.get_elapsed_time(before, after) > 0
    other = cp.cuda.Stream(non_blocking=True)
    stream.launch(lambda: time.sleep(0.1), "slow")
    gate = stream.record()
    other.wait_event(gate)
    other.launch(lambda: ran.append(3), "after the gate")
    done = other.record()
    with pytest.raises(emu.CUDARuntimeError, match="NotReady"):
        cp.cuda.get_elapsed_time(gate, done)
    other.synchronize()
    assert gate.done and ran == [1, 2, 3]


def test_a_copy_from_pinned_memory_rewritten_before_it_ran_fails_naming_the_buffer(cards) -> None:
    cp = cards("64MiB", delay="0.2")
    cupyx = runtime.get_cupyx()
    host = cupyx.empty_pinned(1024, dtype=np.uint8)
    host[:] = 1
    dev = cp.empty(1024, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    rt = cp.cuda.runtime
    rt.memcpyAsync(dev.data.ptr, host.ctypes.data, 1024, rt.memcpyHostToDevice, stream.ptr)
    host[:] = 2  # before the copy ran: a GPU would have sent 1s or 2s, or some of each
    with pytest.raises(emu.CUDARuntimeError, match=r"pinned buffer #\d+ \(1,024 bytes, allocated at "
                                                   r".*test_emulated_device.py:\d+ in test_a_copy.*the host wrote"):
        stream.synchronize()
    # waited for, the same copy is fine; a pageable source is taken when the copy is queued
    rt.memcpyAsync(dev.data.ptr, host.ctypes.data, 1024, rt.memcpyHostToDevice, stream.ptr)
    stream.synchronize()
    pageable = np.full(1024, 3, dtype=np.uint8)
    rt.memcpyAsync(dev.data.ptr, pageable.ctypes.data, 1024, rt.memcpyHostToDevice, stream.ptr)
    pageable[:] = 4
    stream.synchronize()
    assert set(dev.get().tolist()) == {3}


def test_device_pointers_and_host_arrays_are_kept_apart(cards) -> None:
    cp = cards("64MiB")
    rt = cp.cuda.runtime
    host = np.zeros(16, dtype=np.uint8)
    with pytest.raises(emu.CUDARuntimeError, match="not device memory"):
        rt.memcpyAsync(host.ctypes.data, host.ctypes.data, 16, rt.memcpyHostToDevice, 0)
    module = cp.RawModule(code=kernel_source("witness"))
    name = next(iter(module._module.kernels))
    fn = module.get_function(name)
    args = [host] * len(module._module.kernels[name].params)
    with pytest.raises(TypeError, match="is a host \\(numpy\\) array; a kernel takes device arrays"):
        fn((1,), (1,), tuple(args))


def test_fresh_device_memory_is_not_zero(cards) -> None:
    cp = cards("64MiB")
    assert int(cp.empty(64, dtype=cp.uint8).max()) == emu.ARENA_FILL
    assert int(cp.zeros(64, dtype=cp.uint8).max()) == 0


def test_pinned_memory_has_a_limit(cards, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuzk.backends.cuda.emulated.arrays import pinned_bytes

    cards("64MiB")
    monkeypatch.setenv(emu.PINNED_ENV, str(pinned_bytes() + MIB))  # beside what earlier tests still hold
    cupyx = runtime.get_cupyx()
    kept = cupyx.empty_pinned(MIB // 2, dtype=np.uint8)
    with pytest.raises(emu.CUDARuntimeError, match="pinned host memory"):
        cupyx.empty_pinned(MIB, dtype=np.uint8)
    del kept
    cupyx.empty_pinned(MIB, dtype=np.uint8)
