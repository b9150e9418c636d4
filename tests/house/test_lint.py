"""The linter the project is configured with (ruff, [tool.ruff] in pyproject.toml) finds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_ruff_finds_nothing():
    out = _ruff(".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_would_find_a_defect(tmp_path):
    # The same configuration on a file with an unused import and an undefined name: the check can fail.
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    out = _ruff(".", cwd=tmp_path)
    assert out.returncode == 1 and "F401" in out.stdout and "F821" in out.stdout
