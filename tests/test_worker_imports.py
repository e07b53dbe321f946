"""What a worker imports before its framework: no pandas (seconds per cell on a small machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_worker_module_does_not_import_pandas() -> None:
    code = "import sys, harness.run.worker; print('pandas' in sys.modules)"
    printed = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert printed == "False"
