"""The CUDA MSM's window-size choice (pure Python: runs without a GPU)."""

from __future__ import annotations

from cuzk.backends.cuda.msm import default_max_window, num_windows, window_size


def test_window_choice_is_monotone() -> None:
    sizes = [1, 2**10, 2**16, 2**20, 2**22, 2**24, 2**26, 2**27]
    cs = [window_size(n) for n in sizes]
    assert cs == sorted(cs) and cs[0] >= 4 and cs[-1] <= 22


def test_default_window_caps() -> None:
    """16-bit windows up to 2^24 scalars, 20-bit above (measured on an H200, msm.py), and never a window
    size whose top window is only a few bits wide."""
    chosen = {log: window_size(1 << log, default_max_window(1 << log)) for log in range(4, 29)}
    assert chosen[20] == chosen[24] == 16 and chosen[25] == chosen[26] == chosen[27] == 20
    for log in range(20, 29):
        c = chosen[log]
        assert 255 - (num_windows(c) - 1) * c >= c // 2, (log, c)
