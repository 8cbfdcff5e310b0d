"""A worker process sets numba's thread count (`set_thread_env`) before numba is imported; numba
refuses a different count once its threads run ("Cannot set NUMBA_NUM_THREADS ..."). So the modules
a spawned child imports to find its entry point must not import numba themselves: checked in a fresh
interpreter, where nothing else has imported it."""

from __future__ import annotations

import subprocess
import sys


def test_worker_entry_modules_do_not_import_numba() -> None:
    code = ("import sys\n"
            "import cuzk.engine.procs, cuzk.engine.synthesis, cuzk.engine.device_worker, cuzk.engine.executor\n"
            "print(sorted(m for m in sys.modules if m == 'numba' or m.startswith('numba.'))[:3])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_device_process_hands_the_gil_round_every_half_millisecond() -> None:
    # Its lanes' threads meet at every kernel sync: a CRITICAL lane must not wait 5 ms at each.
    code = ("import sys\n"
            "from cuzk.engine.device_worker import DEVICE_SWITCH_INTERVAL_S, set_device_switch_interval\n"
            "before = sys.getswitchinterval()\n"
            "set_device_switch_interval()\n"
            "print(before, sys.getswitchinterval(), DEVICE_SWITCH_INTERVAL_S)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    before, after, wanted = map(float, out.stdout.split())
    assert before == 0.005 and after == wanted == 0.0005
