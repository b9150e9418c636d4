"""`make`'s environment set-up (tools/setup_env.py): progress a learner can follow, pip's whole
output only when it fails."""

from __future__ import annotations

import importlib.util
import io
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("setup_env", ROOT / "tools" / "setup_env.py")
setup_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_env)

PIP_OUTPUT = """\
Looking in indexes: https://pypi.org/simple
Obtaining file:///home/ada/course
Collecting jax==0.12.0.1 (from sharded-checkpointing-course==0.1.0)
  Downloading jax-0.12.0.1-py3-none-any.whl (2.5 MB)
Processing /opt/wheels/numpy-2.4.6-cp313-cp313-manylinux_2_28_x86_64.whl (from jax==0.12.0.1)
Collecting jaxlib==0.12.0.1
  Downloading jaxlib-0.12.0.1-cp313-cp313-manylinux2014_x86_64.whl (85.1 MB)
Installing collected packages: numpy, jaxlib, jax, sharded-checkpointing-course
  !! Please be careful with folders in your working directory (a setuptools warning box)
Successfully installed jax-0.12.0.1 jaxlib-0.12.0.1 numpy-2.4.6 sharded-checkpointing-course-0.1.0
"""


def test_progress_names_each_package_and_the_download_size():
    out = io.StringIO()
    progress = setup_env.Progress(out)
    for line in PIP_OUTPUT.splitlines(keepends=True):
        progress.feed(line)
        progress.last = -1e9  # a log line for every package (a log gets one every few seconds)
    text = out.getvalue()
    for name in ("jax 0.12.0.1", "numpy 2.4.6", "jaxlib 0.12.0.1"):
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
    assert "tools/setup_env.py $(VENV)" in text and "tools/find_python.sh" in text and "--quiet" not in text


def _python(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_an_environment_of_another_python_is_built_anew(tmp_path, capsys, monkeypatch):
    """A .venv made by Python 3.11 (the course's Python before it moved to 3.12+) is rebuilt with the
    Python running the set-up, not patched with packages its Python cannot run."""
    made = []
    monkeypatch.setattr(setup_env.venv.EnvBuilder, "create", lambda self, target: made.append(self.clear))
    _python(tmp_path / "venv" / "bin" / "python", "case \"$2\" in *version_info*) echo 3 11;; *) exit 0;; esac\n")
    assert setup_env.main([str(tmp_path / "venv"), "-e", "."]) == 0
    out = capsys.readouterr().out
    assert made == [True] and "runs Python 3.11; rebuilding it with Python 3." in out
    # The control: one of this Python's own version is updated in place.
    here = " ".join(map(str, setup_env.sys.version_info[:2]))
    _python(tmp_path / "venv" / "bin" / "python", f"case \"$2\" in *version_info*) echo {here};; *) exit 0;; esac\n")
    made.clear()
    assert setup_env.main([str(tmp_path / "venv"), "-e", "."]) == 0
    assert made == [] and "Updating the course's environment" in capsys.readouterr().out


def _find(tmp_path, env: dict) -> subprocess.CompletedProcess:
    base = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
            "PYENV_ROOT": str(tmp_path / "pyenv")}
    return subprocess.run(["/bin/sh", str(ROOT / "tools" / "find_python.sh")], env={**base, **env}, capture_output=True,
                          text=True, timeout=60)


def _fake(path: Path, version: tuple[int, int], runs: bool = True) -> Path:
    """A 'python' that answers as Python ``version`` would (or, not running, as a pyenv shim of an
    unselected version does)."""
    major, minor = version
    ok = f"(3, 12) <= ({major}, {minor}) <= (3, 13)"
    body = (f"case \"$*\" in *sys.exit*) python3 -c 'import sys; sys.exit(0 if {ok} else 1)';; "
            f"*) echo Python {major}.{minor}.1;; esac\n") if runs else "echo 'pyenv: command not found' >&2; exit 127\n"
    return _python(path, body)


def test_make_finds_a_suitable_python_by_what_it_answers(tmp_path):
    """tools/find_python.sh: 3.13 before 3.12; a name on PATH that does not run (pyenv's shim of an
    unselected version) is passed over for pyenv's own; PYTHON= is checked; none: one sentence."""
    _fake(tmp_path / "bin" / "python3.13", (3, 13), runs=False)  # the shim
    _fake(tmp_path / "bin" / "python3.12", (3, 12))
    assert _find(tmp_path, {}).stdout.strip() == str(tmp_path / "bin" / "python3.12")
    pyenv313 = _fake(tmp_path / "pyenv" / "versions" / "3.13.0" / "bin" / "python3.13", (3, 13))
    assert _find(tmp_path, {}).stdout.strip() == str(pyenv313)
    assert _find(tmp_path, {"PYTHON": str(tmp_path / "bin" / "python3.12")}).stdout.strip().endswith("python3.12")
    # an environment already built with a suitable Python keeps it; one built with 3.11 does not
    venv312 = _fake(tmp_path / "venv" / "bin" / "python", (3, 12))
    assert _find(tmp_path, {"VENV_PYTHON": str(venv312)}).stdout.strip() == str(venv312)
    venv311 = _fake(tmp_path / "venv311" / "bin" / "python", (3, 11))
    assert _find(tmp_path, {"VENV_PYTHON": str(venv311)}).stdout.strip() == str(pyenv313)
    old = _fake(tmp_path / "bin" / "python3.11", (3, 11))
    refused = _find(tmp_path, {"PYTHON": str(old)})
    assert refused.returncode == 1 and "is not Python 3.12 or 3.13 (Python 3.11.1)" in refused.stderr
    for gone in (pyenv313, tmp_path / "bin" / "python3.12"):
        gone.unlink()
    tools = tmp_path / "tools"  # the commands the script uses, and no Python of this machine's
    tools.mkdir()
    for command in ("ls", "sort", "head"):
        (tools / command).symlink_to(shutil.which(command))
    none = _find(tmp_path, {"PATH": f"{tmp_path / 'bin'}:{tools}"})
    assert none.returncode == 1 and none.stdout == "" and len(none.stderr.strip().splitlines()) == 1
    assert "needs Python 3.13 or 3.12 and none was found" in none.stderr and "PYTHON=" in none.stderr
