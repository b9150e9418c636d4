"""Build the course's environment for ``make``: say what is being installed and how long it takes.

    python3 tools/setup_env.py .venv -e ".[test]"

pip's own output is a few hundred lines (and, for an editable install, a setuptools warning box
that is not about the learner's machine): this prints one progress line per package instead, and
pip's whole output only when it fails. Each step says what it is doing, and while a step is silent
(creating the environment, updating pip, pip unpacking JAX) a heartbeat says it is still at it: on
a terminal the status line's clock ticks every second, in a log a line comes every
:data:`HEARTBEAT_S` seconds. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import venv
from pathlib import Path

# "Collecting jax==0.12.0.1", "Processing /x/jax-0.12.0.1-py3-none-any.whl (from flax==0.12.12)"
_PACKAGE = re.compile(r"^(?:Collecting (?P<spec>[A-Za-z0-9_.\-\[\]]+)(?:==(?P<pin>\S+))?"
                      r"|Processing \S*?/(?P<wheel>[A-Za-z0-9_.]+?)-(?P<version>\d[^-/\s]*)-\S*\.whl)")
_DOWNLOAD = re.compile(r"^\s*Downloading \S+ \((?P<size>[\d.]+) (?P<unit>[kMG]B)\)")
_INSTALLING = re.compile(r"^Installing collected packages: (?P<names>.*)")
_UNITS = {"kB": 1e3, "MB": 1e6, "GB": 1e9}
HEARTBEAT_S = 10.0  # the longest a log goes without a line while a step runs (a terminal: 1 s)


class Progress:
    """One status line: rewritten in place on a terminal, a line per step elsewhere (a log, CI)."""

    def __init__(self, stream=None):
        stream = stream or sys.stdout
        self.stream, self.start, self.tty = stream, time.monotonic(), stream.isatty()
        self.packages, self.installed, self.downloaded, self.width, self.last = 0, 0, 0.0, 0, -1e9
        self.step, self.step_start = "", 0.0  # what is under way, and since when (for the heartbeat)
        self.lock = threading.Lock()  # the heartbeat writes from a thread of its own

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def show(self, text: str, often: bool = False) -> None:
        """A status line; ``often`` lines go to a log at most every few seconds."""
        with self.lock:
            if often and not self.tty and self.elapsed() - self.last < 3:
                return
            self.last = self.elapsed()
            line = f"  [{self.elapsed():4.0f} s] {text}"
            if self.tty:
                pad = max(0, self.width - len(line))
                self.stream.write("\r" + line + " " * pad)
                self.width = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def begin(self, step: str) -> None:
        """A new step: shown now, and named by the heartbeat while it runs."""
        self.step, self.step_start = step, self.elapsed()
        self.show(step)

    def beat(self) -> None:
        """Say the step is still under way, where nothing was shown for a while (a second on a
        terminal, :data:`HEARTBEAT_S` in a log)."""
        if self.step and self.elapsed() - self.last >= (1.0 if self.tty else HEARTBEAT_S):
            self.show(f"{self.step}: still at it, {self.elapsed() - self.step_start:.0f} s into this step")

    def heartbeat(self) -> Heartbeat:
        return Heartbeat(self)

    def done(self, text: str) -> None:
        with self.lock:
            if self.tty and self.width:
                self.stream.write("\r" + " " * self.width + "\r")
            self.stream.write(text + "\n")
            self.stream.flush()

    def feed(self, line: str) -> None:
        if m := _PACKAGE.match(line):
            self.packages += 1
            name = f"{m['spec'] or m['wheel']} {m['pin'] or m['version'] or ''}".strip()
            self.step = f"finding and downloading packages ({self.packages} so far)"
            self.show(f"{self.packages:3d} packages found; {name}"
                      + (f" ({self.downloaded / 1e6:,.0f} MB downloaded)" if self.downloaded else ""), often=True)
        elif m := _DOWNLOAD.match(line):
            self.downloaded += float(m["size"]) * _UNITS[m["unit"]]
        elif m := _INSTALLING.match(line):
            self.installed = len(m["names"].split(","))
            self.begin(f"installing {self.installed} packages into the environment (the longest step: unpacking JAX "
                       "and jaxlib)")


class Heartbeat:
    """``with progress.heartbeat():`` a thread that calls :meth:`Progress.beat` while the block runs."""

    def __init__(self, progress: Progress):
        self.progress, self.stop = progress, threading.Event()
        self.thread = threading.Thread(target=self._run, name="setup-env-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(min(0.5, HEARTBEAT_S / 4)):
            self.progress.beat()

    def __enter__(self) -> Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def pip(python: Path, args: list[str], progress: Progress | None) -> tuple[int, str]:
    """Run pip, feeding its output to ``progress``; return its exit status and whole output."""
    env = {**os.environ, "PIP_PROGRESS_BAR": "off", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([str(python), "-m", "pip", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if progress is not None:
            progress.feed(line)
    return proc.wait(), "".join(lines)


def venv_python_version(python: Path) -> tuple[int, ...] | None:
    """(major, minor) of an environment's Python, or None where there is none or it does not start."""
    try:
        out = subprocess.run([str(python), "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=60)
        return tuple(int(x) for x in out.stdout.split()) if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    target, spec = Path(argv[0]), argv[1:]
    python = target / "bin" / "python"
    progress = Progress()
    with progress.heartbeat():
        status = _build(target, spec, python, progress)
    if status != 0:
        return status
    plural = "" if progress.installed == 1 else "s"
    progress.done(f"Environment ready in {progress.elapsed():.0f} s: {progress.installed} package{plural} installed"
                  + (f", {progress.downloaded / 1e6:,.0f} MB downloaded." if progress.downloaded else "."))
    return 0


def _build(target: Path, spec: list[str], python: Path, progress: Progress) -> int:
    had = venv_python_version(python)
    if had is not None and had != sys.version_info[:2]:
        # Built by another Python (the course moved to 3.12+, or PYTHON= names another): made anew.
        print(f"The environment in {target}/ runs Python {'.'.join(map(str, had))}; "
              f"rebuilding it with Python {sys.version.split()[0]} ({sys.executable}).", flush=True)
        progress.begin("creating the virtual environment anew")
        venv.EnvBuilder(with_pip=True, clear=True).create(target)
    elif python.exists():
        print(f"Updating the course's environment in {target}/ to pyproject.toml.", flush=True)
    else:
        print(f"Setting up the course's environment in {target}/ (first run only: JAX, Flax, Orbax, JupyterLab "
              "and nbgrader, about 1 GB; one to ten minutes, most of it downloading).", flush=True)
    if not python.exists():
        progress.begin("creating the virtual environment")
        venv.EnvBuilder(with_pip=True).create(target)
    progress.begin("updating pip")
    status, output = pip(python, ["install", "--upgrade", "pip"], None)
    if status == 0:
        progress.begin("finding and downloading packages (pip resolves the versions first)")
        status, output = pip(python, ["install", *spec], progress)
    progress.step = ""  # the steps are over: no heartbeat after the last line
    if status != 0:
        progress.done("")
        sys.stdout.write(output[-20000:])
        print(f"\nerror: installing the course's environment failed (pip's output is above). Fix what it says, "
              f"then run make again; `rm -rf {target}` starts from scratch.", file=sys.stderr)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
