"""The fuzz targets of fuzz/cuzk_fuzz_targets.py and the committed corpus, for the tests in this folder."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FUZZ_DIR = REPO / "fuzz"
CORPUS = FUZZ_DIR / "corpus"
if str(FUZZ_DIR) not in sys.path:
    sys.path.insert(0, str(FUZZ_DIR))
fuzz_targets = importlib.import_module("cuzk_fuzz_targets")


def corpus_files(target: str) -> list[Path]:
    folder = CORPUS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def seeds(target: str) -> list[bytes]:
    """The corpus inputs the target accepts (the valid examples mutations start from)."""
    return [data for data in (p.read_bytes() for p in corpus_files(target)) if fuzz_targets.run_clean(target, data)]
