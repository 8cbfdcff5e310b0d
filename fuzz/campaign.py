"""Run every fuzz target with atheris for a time budget, round-robin, and record what ran.

    nice -n 10 .venv/bin/python fuzz/campaign.py --per-target 600 --slice 150 --record fuzz/results/RUN.json

Each slice is one `run_atheris.py` process (-max_total_time = slice, -timeout = 10 s per input), so
every target gets equal time even if the campaign is stopped early. New inputs collect in a work
directory; crash/timeout/oom inputs land in <work>/artifacts. After every slice the record (JSON:
per target seconds, executions, crashes, artifact names) is rewritten, so it is current at any time.
With --merge the work corpus is merged into fuzz/corpus/<target> (only inputs adding coverage).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cuzk_fuzz_targets import TARGETS  # noqa: E402

DONE_RE = re.compile(rb"Done (\d+) runs in (\d+) second")
EXEC_RE = re.compile(rb"^#(\d+)\s", re.MULTILINE)


def run_slice(target: str, seconds: int, work: Path, max_len: int | None) -> dict:
    corpus = work / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = work / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    before = set(artifacts.iterdir())
    args = [sys.executable, str(HERE / "run_atheris.py"), target, f"-max_total_time={seconds}", "-timeout=10",
            "-rss_limit_mb=4096", f"-artifact_prefix={artifacts}/{target}-", "-print_final_stats=1"]
    if max_len:
        args.append(f"-max_len={max_len}")
    args += [str(corpus), str(HERE / "corpus" / target)]
    start = time.monotonic()
    proc = subprocess.run(args, capture_output=True, timeout=seconds * 3 + 300)
    elapsed = time.monotonic() - start
    out = proc.stdout + proc.stderr
    done = DONE_RE.search(out)
    execs = int(done.group(1)) if done else max((int(m) for m in EXEC_RE.findall(out)), default=0)
    new = sorted(p.name for p in set(artifacts.iterdir()) - before)
    tail = out[-3000:].decode(errors="replace") if proc.returncode else ""
    fuzz_s = int(done.group(2)) if done else 0
    return {"target": target, "seconds": round(elapsed, 1), "fuzz_seconds": fuzz_s, "executions": execs,
            "returncode": proc.returncode,
            "crashes": len(new), "artifacts": new, "failure_tail": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-target", type=int, default=600, help="seconds per target in total")
    parser.add_argument("--slice", type=int, default=150, help="seconds per run")
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--work", type=Path, default=Path("/tmp/cuzk-fuzz-work"))
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--max-len", type=int, default=None)
    parser.add_argument("--merge", action="store_true", help="merge new coverage into fuzz/corpus at the end")
    args = parser.parse_args()
    record = {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "python": platform.python_version(), "per_target_s": args.per_target, "slice_s": args.slice,
              "slices": [], "totals": {}}
    spent = dict.fromkeys(args.targets, 0.0)

    def save() -> None:
        totals = {}
        for t in args.targets:
            rows = [s for s in record["slices"] if s["target"] == t]
            totals[t] = {"seconds": round(sum(s["seconds"] for s in rows), 1),
                         "fuzz_seconds": sum(s["fuzz_seconds"] for s in rows),
                         "executions": sum(s["executions"] for s in rows),
                         "crashes": sum(s["crashes"] for s in rows), "slices": len(rows)}
        record["totals"] = totals
        record["updated_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1) + "\n")

    while any(spent[t] < args.per_target for t in args.targets):
        for t in args.targets:
            left = args.per_target - spent[t]
            if left <= 0:
                continue
            row = run_slice(t, int(min(args.slice, max(left, 10))), args.work, args.max_len)
            spent[t] += max(row["fuzz_seconds"], 1)
            record["slices"].append(row)
            save()
            print(f"{t}: {row['seconds']} s, {row['executions']} execs, {row['crashes']} crash(es)", flush=True)
    if args.merge:  # libFuzzer re-runs argv[0] for a merge: the script itself, with this Python first on PATH
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        for t in args.targets:
            subprocess.run([str(HERE / "run_atheris.py"), t, "-merge=1", "-timeout=10", str(HERE / "corpus" / t),
                            str(args.work / "corpus" / t)], capture_output=True, env=env)
    record["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
