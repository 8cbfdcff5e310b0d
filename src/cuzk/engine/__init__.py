"""The proving engine: scheduler, partition pipeline, SRS and memory management behind the daemon.

Kept import-free on purpose: worker processes are started with `spawn` and import single modules
of this package, which must not drag in the whole engine (or numba) before they set their thread
counts.
"""
