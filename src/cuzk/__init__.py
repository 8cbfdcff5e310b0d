"""cuzk: a Groth16 (BLS12-381) proving daemon for Filecoin proofs."""

import os

__version__ = "0.1.0"

# numba's OpenMP threads spin after each parallel region by default. cuzk runs several numba
# processes side by side (synthesis workers, device workers, the CLI), and a spinning thread takes
# the core another process needs: on 2 busy cores a 2^12 inverse NTT took 72 ms instead of 0.9 ms,
# and the H polynomial of a 2^10 proof 240 ms instead of 3 ms. Passive waiting costs microseconds per
# region when cores are free. Set before numba starts OpenMP (it reads the variable once); a value
# the user exported wins, and spawned children inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
