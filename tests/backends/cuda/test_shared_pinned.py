"""One pinned host copy of a key's streamed bases per host (`cuzk.backends.cuda.shared_pinned`): 2 and 4
device processes on emulated cards streaming the same key hold one copy between them, each proves
with it, and the copy goes with the last of them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cuzk.backends.cuda import shared_pinned

# A device process: loads the key streaming every vector, proves once, reports, then waits for a
# line on stdin before it unloads the key (or is killed).
CHILD = """
import json, random, sys
from cuzk.backends.cuda import CudaBackend
from cuzk.backends.cuda.plan import DevicePlan
from cuzk.circuits.registry import lookup
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.params_file import read_params
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proof

pk = read_params(sys.argv[1])
backend = CudaBackend(int(sys.argv[2]), memory_margin=0)
backend.load_key(pk, plan=DevicePlan(budget=1 << 40, mode="streaming", resident=(), reserve=0, batch=1 << 9))
asg = Assignment.from_proving_assignment(synthesize_for_proving(lookup("bits-3").example(random.Random(7))))
proof = backend.prove(pk, asg, r=3, s=4)
(key,) = backend.memory_plan()["keys"]
print(json.dumps({"verified": verify_proof(pk.vk, proof, asg.public_inputs()), "proof": proof.to_bytes().hex(),
                  "streamed": key["streamed_bytes"], "shared": key["host_pinned_shared_bytes"],
                  "pinned": key["host_pinned_bytes"]}), flush=True)
sys.stdin.readline()
backend.unload_key(pk)
print("unloaded", flush=True)
"""


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits_params) -> Path:  # type: ignore[no-untyped-def]
    if shutil.which("g++") is None:
        pytest.skip("the emulated device builds its kernels with g++")
    monkeypatch.setenv("CUZK_EMULATED_GPUS", "2GiB,2GiB")
    monkeypatch.setenv("CUZK_EMULATED_GPU_ROOM", str(tmp_path / "cards"))
    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path / "shm"))
    return bits_params.params_path


def start(params: Path, card: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(params), str(card)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=os.environ.copy())


@pytest.mark.slow
@pytest.mark.parametrize("count", [2, 4])
def test_devices_streaming_one_key_hold_one_copy_released_with_the_last(host: Path, count: int) -> None:
    children = [start(host, k % 2) for k in range(count)]  # devices [0, 1, 0, 1]: two per card at 4
    try:
        reports = [json.loads(c.stdout.readline()) for c in children]
        assert all(r["verified"] for r in reports) and len({r["proof"] for r in reports}) == 1
        streamed = reports[0]["streamed"]
        assert streamed > 0 and all(r["shared"] == streamed for r in reports)
        copies = shared_pinned.held_copies()
        assert len(copies) == 5 and sum(copies.values()) == streamed  # one copy of each vector, not `count`
        for child in children[:-1]:
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline().strip() == "unloaded"
        assert sum(shared_pinned.held_copies().values()) == streamed  # the last device still holds it
        children[-1].stdin.write("\n")
        children[-1].stdin.flush()
        assert children[-1].stdout.readline().strip() == "unloaded"
        assert shared_pinned.held_copies() == {}
    finally:
        for child in children:
            child.kill()
            child.wait(30)


@pytest.mark.slow
def test_a_copy_whose_holders_were_killed_is_removed_by_the_next_process(host: Path) -> None:
    first = start(host, 0)
    assert json.loads(first.stdout.readline())["verified"]
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    assert len(shared_pinned.held_copies()) == 5  # left behind by the killed holder
    second = start(host, 1)
    try:
        report = json.loads(second.stdout.readline())  # it swept them when it started, and made its own
        assert report["verified"] and report["shared"] == report["streamed"]
        second.stdin.write("\n")
        second.stdin.flush()
        assert second.stdout.readline().strip() == "unloaded"
        assert shared_pinned.held_copies() == {}
    finally:
        second.kill()
        second.wait(30)


def test_a_copy_is_made_once_and_joined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path))
    fills: list[int] = []

    def fill(a: np.ndarray) -> None:
        fills.append(1)
        a[:] = np.arange(a.size, dtype=a.dtype).reshape(a.shape)

    registered: dict[int, int] = {}
    copy = shared_pinned.SharedHostCopy.open("k-h", (4, 3), np.dtype(np.uint32), fill, registered.__setitem__,
                                             registered.pop)
    assert copy.made and fills == [1] and registered == {copy.array.ctypes.data: 48}
    assert copy.array.ravel().tolist() == list(range(12)) and shared_pinned.held_copies() == {"k-h": 48}
    with pytest.raises(ValueError, match="48 bytes held by processes"):
        shared_pinned.SharedHostCopy.open("k-h", (5, 3), np.dtype(np.uint32), fill)
    copy.release()
    assert registered == {} and shared_pinned.held_copies() == {}
    assert shared_pinned.room_for("k-h", 1 << 20) and not shared_pinned.room_for("k-h", 1 << 60)


def test_a_copy_dropped_unreleased_still_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend discarded with its keys loaded: its copies' pages are unregistered before they are
    unmapped (CUDA would refuse the next mapping at that address), and the copy goes with its holder."""
    import gc

    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path))
    registered: dict[int, int] = {}
    copy = shared_pinned.SharedHostCopy.open("k-l", (4, 3), np.dtype(np.uint32), lambda a: a.fill(7),
                                             registered.__setitem__, registered.pop)
    assert len(registered) == 1 and shared_pinned.held_copies() == {"k-l": 48}
    del copy
    gc.collect()
    assert registered == {} and shared_pinned.held_copies() == {} and not (tmp_path / "k-l").exists()


def test_a_copy_that_cannot_be_made_or_registered_leaves_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The error that stopped it is the one raised (not the mapping's, closed while a view of it
    lived), and this process holds nothing of the copy: no holder file, no registration."""
    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path))
    kept: list[np.ndarray] = []

    def failing_fill(a: np.ndarray) -> None:
        kept.append(a[1:])  # a view outlives the failure, as a failed device copy's frame keeps one
        raise RuntimeError("cudaErrorInvalidValue: invalid argument")

    with pytest.raises(RuntimeError, match="invalid argument"):
        shared_pinned.SharedHostCopy.open("k-a", (4, 3), np.dtype(np.uint32), failing_fill)
    assert shared_pinned.held_copies() == {} and not list((tmp_path / "k-a").glob("holders/*"))

    def refuse(address: int, nbytes: int) -> None:
        raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")

    with pytest.raises(RuntimeError, match="AlreadyRegistered"):
        shared_pinned.SharedHostCopy.open("k-b", (4, 3), np.dtype(np.uint32), lambda a: a.fill(1), refuse)
    assert not (tmp_path / "k-b").exists()  # its only holder left: the copy is gone


def test_a_sweep_never_removes_a_copy_being_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A device process starting (it sweeps) beside one making a copy: the maker, waiting for the
    host's lock, has made no directory a sweep could take for an abandoned copy and remove under it."""
    import fcntl
    import threading

    monkeypatch.setenv(shared_pinned.ROOT_ENV, str(tmp_path))
    sweeps: list[list[str]] = []
    with open(tmp_path / ".lock", "a") as lock:  # another process's hold on the lock, as flock sees it
        fcntl.flock(lock, fcntl.LOCK_EX)
        opened: list[shared_pinned.SharedHostCopy] = []
        maker = threading.Thread(target=lambda: opened.append(shared_pinned.SharedHostCopy.open(
            "k-s", (4, 3), np.dtype(np.uint32), lambda a: a.fill(5))))
        maker.start()
        maker.join(0.5)  # it waits for the lock
        assert maker.is_alive() and not (tmp_path / "k-s").exists()
        sweeper = threading.Thread(target=lambda: sweeps.append(shared_pinned.sweep()))
        sweeper.start()
        fcntl.flock(lock, fcntl.LOCK_UN)
    maker.join(30)
    sweeper.join(30)
    assert sweeps == [[]] and len(opened) == 1 and shared_pinned.held_copies() == {"k-s": 48}
    assert int(opened[0].array.ravel()[0]) == 5
    opened[0].release()
    assert shared_pinned.held_copies() == {}
