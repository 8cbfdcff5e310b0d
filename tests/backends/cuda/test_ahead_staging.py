"""The CUDA backend's rule for staging a waiting proof's inputs beside the proof holding the device
(`cuzk.backends.cuda.device.ahead_fits`): pure arithmetic, so it runs without a GPU. Figures are a
PoRep-32GiB partition's on an H200 (GB): 144.8 plannable, 54 resident (key and compiled circuit), a
proof's reserve 60.2, staging 17.1."""

from __future__ import annotations

from typing import Any

from cuzk.backends.cuda.device import ahead_fits

GB = 10**9
PLANNABLE, RESIDENT, RESERVE, STAGING = 144.8 * GB, 54 * GB, 60.2 * GB, 17.1 * GB


def _fits(held_by_running: float, *, pending: float = 0.0) -> bool:
    """The running proof holds `held_by_running`: its growth since it took the device, counted with
    the inputs it had staged ahead (the backend lowers its base by them)."""
    available = PLANNABLE - RESIDENT - held_by_running - pending
    return ahead_fits(int(STAGING), int(available), ahead_pending=int(pending), running_reserve=int(RESERVE),
                      running_grown=int(held_by_running))


def test_mid_proof_the_running_proof_is_charged_what_its_reserve_still_allows() -> None:
    # 40 GB held of a 60.2 GB reserve: 20.2 more at most, and 17.1 + 20.2 <= 50.8 free.
    assert _fits(40 * GB) and _fits(0) and _fits(RESERVE)
    # Charging the whole reserve on top of what it holds (the old rule) refused this.
    assert not ahead_fits(int(STAGING), int(PLANNABLE - RESIDENT - 40 * GB), ahead_pending=0,
                          running_reserve=int(RESERVE), running_grown=0)


def test_what_does_not_fit_is_refused() -> None:
    assert not _fits(40 * GB, pending=17.1 * GB)  # another waiting proof's staging takes the room
    assert not ahead_fits(int(STAGING), int(STAGING) - 1, ahead_pending=0, running_reserve=0, running_grown=0)
    assert ahead_fits(int(STAGING), int(STAGING), ahead_pending=0, running_reserve=0, running_grown=0)


def test_growth_is_credited_within_the_reserve_only() -> None:
    need, reserve = int(STAGING), int(RESERVE)
    # Freed inputs (negative growth) charge the whole reserve, as no growth does.
    for grown in (-5 * GB, 0):
        assert ahead_fits(need, need + reserve, ahead_pending=0, running_reserve=reserve, running_grown=grown)
        assert not ahead_fits(need, need + reserve - 1, ahead_pending=0, running_reserve=reserve,
                              running_grown=grown)
    # Growth past the reserve charges nothing more, and never less than nothing.
    assert ahead_fits(need, need, ahead_pending=0, running_reserve=reserve, running_grown=reserve + GB)
    assert not ahead_fits(need, need - 1, ahead_pending=0, running_reserve=reserve, running_grown=reserve + GB)


def test_with_no_proof_on_the_device_the_next_ones_reserve_is_kept() -> None:
    """A 16 GiB cap (PoRep-32GiB streaming, GiB): 15.2 plannable, nothing resident, a proof's reserve
    14.3, a, b, c 12. With the device idle, a proof that stages ahead would leave the next proof to
    take the device (which may not have staged) 3.2 of its 14.3: refused."""
    gib = 1 << 30
    plannable, reserve, staging = int(15.2 * gib), int(14.3 * gib), 12 * gib
    assert not ahead_fits(staging, plannable, ahead_pending=0, running_reserve=reserve, running_grown=0)
    # On the H200's resident plan the same rule leaves one proof staging ahead beside a running one.
    assert ahead_fits(int(STAGING), int(PLANNABLE - RESIDENT), ahead_pending=0, running_reserve=int(RESERVE),
                      running_grown=0)
    assert not ahead_fits(int(STAGING), int(PLANNABLE - RESIDENT - STAGING), ahead_pending=int(STAGING),
                          running_reserve=int(RESERVE), running_grown=0)


def _admission(reserve: int, memory: Any, *, running_reserve: int = 0, running_base: int = 0) -> Any:
    """An `Admission` for `stage_ahead`: one loaded key of working reserve `reserve`, the `memory`
    given, and a proof of `running_reserve` on the device since the pool held `running_base` (0: none);
    it stages nothing ahead yet."""
    from cuzk.backends.cuda.admission import Admission

    admission = Admission(memory, lambda: reserve)
    admission.running_reserve, admission.running_base = running_reserve, running_base
    return admission


def test_the_backend_charges_the_largest_reserve_when_the_device_is_idle() -> None:
    """`Admission.stage_ahead` with a stand-in memory: no proof holds the device, and the loaded key's
    reserve is charged (the staging that made the 16 GiB cap's proofs fail with the device held)."""
    from types import SimpleNamespace

    gib = 1 << 30
    staged: list[int] = []
    admission = _admission(int(14.3 * gib), SimpleNamespace(pool_used=lambda: 0, available=lambda: int(15.2 * gib)),
                           running_base=5 * gib)
    assert admission.stage_ahead(12 * gib, 0, lambda: staged.append(1) or "staged") == (None, 0)
    assert not staged and admission.ahead_bytes == 0
    # A card with room for both: staged, counted as staging while it allocates, then as in use only
    # (out of `available`) and as growth that is not the running proof's.
    admission.memory.available = lambda: 27 * gib
    during: list[int] = []
    assert admission.stage_ahead(12 * gib, 0, lambda: during.append(admission.ahead_bytes) or "staged") \
        == ("staged", 12 * gib)
    assert during == [12 * gib] and admission.ahead_bytes == 0 and admission.ahead_since_begin == 12 * gib
    # Staging that finds the memory gone (None) is not counted.
    assert admission.stage_ahead(gib, 0, lambda: None) == (None, 0)
    assert admission.ahead_bytes == 0 and admission.ahead_since_begin == 12 * gib


def test_a_second_proof_stages_beside_one_already_staged_when_the_free_memory_allows() -> None:
    """`Admission.stage_ahead` with a stand-in memory on the H200's resident plan: one proof holds the
    device (10 GB grown of its 60.2 GB reserve) and one has staged its 17.1 GB ahead. What it staged is
    in use, so the free memory lacks it; a second waiting proof (a CRITICAL one's 3 GB) fits beside
    both, where counting the first staging again as pending refused it."""
    from types import SimpleNamespace

    used = {"pool": RESIDENT + 10 * GB}  # the key, and what the running proof grew since it began
    memory = SimpleNamespace(pool_used=lambda: int(used["pool"]), available=lambda: int(PLANNABLE - used["pool"]))
    admission = _admission(int(RESERVE), memory, running_reserve=int(RESERVE), running_base=int(RESIDENT))

    def stage(nbytes: int) -> Any:
        return admission.stage_ahead(nbytes, 0, lambda: used.__setitem__("pool", used["pool"] + nbytes) or nbytes)

    assert stage(int(STAGING)) == (int(STAGING), int(STAGING))
    assert stage(3 * GB) == (3 * GB, 3 * GB)
    assert admission.ahead_bytes == 0 and admission.ahead_since_begin == int(STAGING) + 3 * GB
    assert stage(11 * GB) == (None, 0)  # 60.7 GB free: 11 and the running proof's last 50.2 do not fit


def _preempting(available: int):
    """An `Admission` whose lock a proof holds at NORMAL in its device phase: reserve 20 GiB, 8 GiB
    grown since it took the device; `available` bytes free; and the compute stream's stand-in."""
    from types import SimpleNamespace

    from cuzk.backends.cuda.admission import Admission

    gib = 1 << 30
    events = iter(range(100))
    admission = Admission(SimpleNamespace(pool_used=lambda: 38 * gib, available=lambda: available), lambda: 20 * gib)
    admission.running_reserve, admission.running_base, admission.current_job = 20 * gib, 30 * gib, "porep p0"
    return admission, SimpleNamespace(record=lambda: next(events))


def _critical_waiter(admission, seen: dict, need: int):
    """A CRITICAL thread queued for `admission`'s lock that will still allocate `need` bytes; records
    the admission's state while it holds the lock."""
    import threading
    import time

    def run() -> None:
        with admission.lock.hold(4):
            seen.update(job=admission.current_job, running=admission.running_reserve, suspended=admission.suspended)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while admission.lock.outranking_waiter() is None:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    admission.waiting_need[admission.lock.outranking_waiter()] = need
    return thread


def test_a_device_phase_lets_a_critical_proof_through_and_takes_the_device_back() -> None:
    """`Admission.preemption_point` with stand-ins: the waiter runs with no proof on the device
    and this one's remaining reserve (20 - 8 GiB) held out of stagings; afterwards this proof holds
    the device again with its reserve, growth and job restored, and the lent time recorded."""
    gib = 1 << 30
    admission, compute = _preempting(available=15 * gib)
    t: dict[str, float] = {}
    gaps: list = []
    with admission.lock.hold(2):
        admission.preemption_point(compute, t, gaps)  # nobody waits: nothing
        assert (t, gaps, admission.preemptions) == ({}, [], 0)
        seen: dict = {}
        thread = _critical_waiter(admission, seen, need=2 * gib)
        admission.preemption_point(compute, t, gaps)
        thread.join(10)
        assert seen == {"job": None, "running": 0, "suspended": 12 * gib}
        assert admission.preemptions == 1 and t["yielded"] > 0 and gaps == [(0, 1)]
        assert (admission.running_reserve, admission.suspended, admission.current_job) == (20 * gib, 0, "porep p0")
        assert admission.memory.pool_used() - admission.running_base - admission.ahead_since_begin == 8 * gib
        assert admission.lock.outranking_waiter() is None


def test_no_preemption_without_room_for_both() -> None:
    """12 GiB still to come for this proof plus 4 GiB for the waiter do not fit in 15 GiB: refused,
    counted, and the waiter gets the device when this proof releases it."""
    gib = 1 << 30
    admission, compute = _preempting(available=15 * gib)
    t: dict[str, float] = {}
    seen: dict = {}
    with admission.lock.hold(2):
        thread = _critical_waiter(admission, seen, need=4 * gib)
        admission.preemption_point(compute, t, [])
        assert admission.preemptions_refused == 1 and admission.preemptions == 0 and "yielded" not in t and not seen
    thread.join(10)
    assert seen["job"] == "porep p0"  # it ran after this proof, which had not reset its state
