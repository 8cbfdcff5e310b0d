"""`cuzk bench`: throughput, latency and per-phase timelines of proofs, against a daemon or in-process.

Modules: `inputs` (what to prove), `runner` (single / batch / stress against a daemon), `local`
(the same in-process), `phases` (per-partition breakdown from the daemon's timings), `stats`
(percentiles, steady state), `record` (the JSON result file), `compare` (two records, with a noise
estimate), `timeline` (Gantt charts as PNG or HTML).
"""
