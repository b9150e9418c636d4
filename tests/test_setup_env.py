"""`make`'s environment set-up (tools/setup_env.py): progress a learner can follow, pip's whole
output only when it fails."""

from __future__ import annotations

import importlib.util
import io
import stat
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("setup_env", ROOT / "tools" / "setup_env.py")
setup_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_env)

PIP_OUTPUT = """\
Looking in indexes: https://pypi.org/simple
Obtaining file:///home/ada/course
Collecting jax==0.10.2 (from sharded-checkpointing-course==0.1.0)
  Downloading jax-0.10.2-py3-none-any.whl (2.5 MB)
Processing /opt/wheels/numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl (from jax==0.10.2)
Collecting jaxlib==0.10.2
  Downloading jaxlib-0.10.2-cp311-cp311-manylinux2014_x86_64.whl (85.1 MB)
Installing collected packages: numpy, jaxlib, jax, sharded-checkpointing-course
  !! Please be careful with folders in your working directory (a setuptools warning box)
Successfully installed jax-0.10.2 jaxlib-0.10.2 numpy-2.4.6 sharded-checkpointing-course-0.1.0
"""


def test_progress_names_each_package_and_the_download_size():
    out = io.StringIO()
    progress = setup_env.Progress(out)
    for line in PIP_OUTPUT.splitlines(keepends=True):
        progress.feed(line)
        progress.last = -1e9  # a log line for every package (a log gets one every few seconds)
    text = out.getvalue()
    for name in ("jax 0.10.2", "numpy 2.4.6", "jaxlib 0.10.2"):
        assert name in text
    assert "(2 MB downloaded)" in text and round(progress.downloaded / 1e6) == 88 and "installing 4 packages" in text
    assert "setuptools" not in text and "Looking in indexes" not in text  # pip's chatter stays out
    assert progress.packages == 3 and progress.installed == 4


def test_a_failed_install_shows_pip_and_what_to_do(tmp_path, capsys):
    # A "python" whose pip fails, as a broken index or a missing compiler makes the real one fail.
    fake = tmp_path / "venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho 'ERROR: Could not find a version that satisfies the requirement jax==99'\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert setup_env.main([str(tmp_path / "venv"), "-e", "."]) == 1
    out, err = capsys.readouterr()
    assert "Could not find a version that satisfies the requirement jax==99" in out
    assert "installing the course's environment failed" in err and "rm -rf" in err


def test_a_working_install_ends_with_its_time(tmp_path, capsys):
    fake = tmp_path / "venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + PIP_OUTPUT + "EOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert setup_env.main([str(tmp_path / "venv"), "-e", "."]) == 0
    out = capsys.readouterr().out
    assert "Updating the course's environment" in out  # its python exists: an update, not a first run
    assert "Environment ready in" in out and "4 packages installed, 88 MB downloaded" in out


def test_the_makefile_uses_it():
    text = (ROOT / "Makefile").read_text()
    assert "tools/setup_env.py $(VENV)" in text and "--quiet" not in text
