"""cuzk: a Groth16 (BLS12-381) proving daemon for Filecoin proofs."""

import os

__version__ = "0.1.0"

# numba's OpenMP threads spin after each parallel region by default. cuzk runs several numba
# processes side by side (synthesis workers, device workers, the CLI), and a spinning thread takes
# the core another process needs: on 2 busy cores small NTTs took tens of times longer (figures:
# benchmarks/HISTORY.md, "Figures cut from code comments"). Passive waiting costs microseconds per
# region when cores are free. Set before numba starts OpenMP (it reads the variable once); a value
# the user exported wins, and spawned children inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
