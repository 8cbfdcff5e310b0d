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
