"""Shared test setup: the repo root on sys.path, and where ../shared lives (tests may read it; the project
never copies it)."""
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TINYEVAL = SHARED / "reference" / "tinyeval"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
