"""The CUDA backend's rule for staging a waiting proof's inputs beside the proof holding the device
(`cuzk.backends.cuda.device.ahead_fits`): pure arithmetic, so it runs without a GPU. Figures are a
PoRep-32GiB partition's on an H200 (GB): 144.8 plannable, 54 resident (key and compiled circuit), a
proof's reserve 60.2, staging 17.1."""

from __future__ import annotations

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
