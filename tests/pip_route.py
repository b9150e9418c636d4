"""The course without make, as the README's "Without make: pip, and hosted notebooks" says, in fresh
virtual environments: the steps tests/learner/test_pip_route.py checks and bench/bench_pip_route.py
times.

- **pip** (``install``): the clone's tracked files copied to a folder of their own (what a fresh
  clone holds; pip's in-tree build writes its ``build/`` and ``egg-info`` there, never here), then
  ``python -m venv`` and ``pip install .`` in that copy; from a folder outside it, the installed
  package holds each of the course's files (the references and hidden tests among them, which the
  README says it ships, and why), and ``jupyter lab`` with the README's settings answers, serving
  the course. (``learner_commands``, run by the test itself: ``grade`` of Unit 1's references as a
  learner's file, ``practice``, ``drill`` and ``progress``.)
- **A hosted notebook** (``hosted``), emulated: a fresh environment with only ``ipykernel``, as a
  hosted runtime has; a real kernel of it runs, in a writable folder outside the clone, the
  README's first cell (``%pip install`` of the course, from the copy's folder instead of the
  repository's address) and then lesson 1 whole, headless.

The suite's installs pass ``--no-compile``: byte-compiling every installed module costs about 25 s
of a core per environment here and changes nothing a learner sees (Python compiles what it imports).

In the suite the installs run in a thread started when the test is collected (tests/conftest.py),
once the background gradings (tests/background.py) have ended: pip and the kernel take the core the
sandbox's tests leave. The gradings run in the test itself, at the end of the run: a grading's
worker is a process the sandbox's tests would count as left by theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHONS = ("3.12", "3.13")
HOSTED_PYTHON = "3.12"  # Colab's
PACKAGES = ("autograder", "ckptlab", "solutions")  # pyproject.toml's [tool.setuptools.packages.find]
FIRST_CELL = "%pip install --quiet {options}{source}"  # the README's hosted-notebook first cell, from a folder here


class RouteFailed(RuntimeError):
    """A step that did not do what the README says, with the end of what it printed."""


def find_python(version: str) -> str | None:
    """A python<version> that runs (pyenv's shims on PATH answer only for the versions set active)."""
    candidates = [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}"))[::-1]]
    candidates += [c for c in (shutil.which(f"python{version}"),) if c]
    for candidate in candidates:
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


def learner_env(home: Path) -> dict:
    """A learner's shell: none of the suite's own settings (its path to this repository, its venv,
    its devices), progress kept in ``home``."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "XLA_FLAGS", "CKPT_COURSE_HOME", "JUPYTER_CONFIG_PATH")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "CKPT_COURSE_HOME": str(home)}


class Steps:
    """Each step's time, in order; a step that fails raises RouteFailed saying which and why."""

    def __init__(self, echo: bool = False):
        self.times: list[tuple[str, float]] = []
        self.echo = echo
        self.current: subprocess.Popen | None = None  # (killed by stop(), a run cut short)
        self.stopped = False

    def run(self, what: str, cmd: list[str], timeout: float = 900, input: str | None = None, **kw) -> str:
        if self.stopped:
            raise RouteFailed("stopped")
        started = time.monotonic()
        self.current = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True, **kw)
        try:
            out, _ = self.current.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.current.pid, signal.SIGKILL)
            out, _ = self.current.communicate()
            raise RouteFailed(f"{what}: still running after {timeout:.0f} s:\n{out[-3000:]}") from None
        if self.current.returncode != 0:
            raise RouteFailed(f"{what} failed (exit code {self.current.returncode}):\n{out[-3000:]}")
        self.took(what, started)
        return out

    def took(self, what: str, started: float) -> None:
        self.times.append((what, round(time.monotonic() - started, 1)))
        if self.echo:
            print(f"  {what}: {self.times[-1][1]:.0f} s", flush=True)

    def stop(self) -> None:
        self.stopped = True
        if self.current is not None and self.current.poll() is None:
            os.killpg(self.current.pid, signal.SIGKILL)


def clone_copy(target: Path) -> Path:
    """The repository's tracked files (as a fresh clone has them) copied into ``target``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:  # (not a git clone: a downloaded archive holds what the repository tracks)
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(".venv", "__pycache__", "build", "*.egg-info",
                                                                    ".git", ".pytest_cache", ".hypothesis"))
        return target
    for name in listed.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def tracked_package_files(clone: Path) -> set[str]:
    return {str(p.relative_to(clone)) for package in PACKAGES for p in (clone / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


_INSTALLED = """
import importlib.metadata as m, json, sys
import autograder, solutions.unit1, autograder.hidden.unit1
files = [str(f) for f in m.files("sharded-checkpointing-course") if f.parts[0] in {packages!r} and "__pycache__" not in f.parts]
print(json.dumps({{"files": files, "autograder": autograder.__file__, "prefix": sys.prefix}}))
"""


def install(python: str, work: Path, steps: Steps, compile_: bool = False) -> dict:
    """The pip route's install and what it gives, from a folder outside the clone: the venv's path,
    the clone's package files the install lacks (none), where ``autograder`` was imported from, and
    JupyterLab answering with the course."""
    clone = clone_copy(work / "clone")
    venv, outside = work / "venv", work / "learner"
    outside.mkdir()
    env = learner_env(work / "home")
    steps.run("python -m venv", [python, "-m", "venv", str(venv)], env=env)
    options = [] if compile_ else ["--no-compile"]
    steps.run("pip install . (not editable)", [str(venv / "bin" / "pip"), "install", "--quiet", *options, "."],
              cwd=clone, env={**env, "VIRTUAL_ENV": str(venv)})
    listed = json.loads(steps.run("the installed package's files", [str(venv / "bin" / "python"), "-c",
                                                                   _INSTALLED.format(packages=PACKAGES)],
                                  cwd=outside, env=env).splitlines()[-1])
    missing = sorted(tracked_package_files(clone) - set(listed["files"]))
    lab = jupyter_lab(venv, clone, env, steps)
    return {"venv": str(venv), "missing": missing, "autograder": listed["autograder"], "prefix": listed["prefix"],
            **lab}


README_LAB = 'JUPYTER_CONFIG_PATH="$PWD/jupyter_config" jupyter lab'  # the README's line, run as it is


def readme_route() -> str:
    """The README's "Without make" commands (its first code block there)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Without make"):]
    return section[section.index("```bash"):section.index("```", section.index("```bash") + 3)]


def jupyter_lab(venv: Path, clone: Path, env: dict, steps: Steps) -> dict:
    """The README's ``jupyter lab`` line, run as it is in the clone with the venv active, until its
    page answers; then where it opens, and what it serves."""
    from ckptlab.twohost import free_port, stop_group

    port = free_port()
    line = f"{README_LAB} --no-browser --port={port} --IdentityProvider.token={' --allow-root' * (os.geteuid() == 0)}"
    started = time.monotonic()
    lab = subprocess.Popen(["bash", "-c", line], cwd=clone, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True,  # (as `. venv/bin/activate` leaves a shell:)
                           env={**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"})
    steps.current = lab
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                with urllib.request.urlopen(url + "/", timeout=5) as r:  # (redirected to its default page)
                    opens, page = r.geturl().removeprefix(url), r.read().decode(errors="replace")
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() - started > 180:
                    raise RouteFailed(f"jupyter lab did not answer in 180 s (exit code {lab.poll()})") from None
                time.sleep(0.5)
        steps.took("jupyter lab answered", started)
        served = {}
        for path in ("course/00_start_here.ipynb", "problems"):
            try:
                with urllib.request.urlopen(f"{url}/api/contents/{path}?content=0", timeout=30) as r:
                    served[path] = json.loads(r.read())["type"]
            except urllib.error.HTTPError as e:
                served[path] = e.code
    finally:
        stop_group(lab)
    return {"lab_page": "JupyterLab" in page, "lab_opens": opens, "lab_serves": served}


def hosted(python: str, work: Path, steps: Steps, compile_: bool = False) -> dict:
    """The hosted route, emulated: the first cell and lesson 1 in a real kernel of a fresh
    environment that has only ipykernel. Returns the lesson's text and what it left in its folder
    and in its temporary folder."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    clone = clone_copy(work / "clone")
    venv, content, temp = work / "hosted", work / "content", work / "tmp"  # content: Colab's /content
    content.mkdir()
    temp.mkdir()
    env = learner_env(work / "home")
    steps.run("a hosted runtime's environment (venv)", [python, "-m", "venv", str(venv)], env=env)
    steps.run("pip install ipykernel", [str(venv / "bin" / "pip"), "install", "--quiet", "ipykernel"], env=env)
    nb = nbformat.read(clone / "course" / "01_parameter_accounting.ipynb", as_version=4)
    options = "" if compile_ else "--no-compile "
    nb.cells.insert(0, nbformat.v4.new_code_cell(FIRST_CELL.format(options=options, source=clone)))
    spec = work / "kernels" / "hosted"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hosted", "language": "python"}))
    km = KernelManager(kernel_name="hosted", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))
    started = time.monotonic()
    client = NotebookClient(nb, km=km, timeout=900, coalesce_streams=True,
                            resources={"metadata": {"path": str(content)}})
    with open(work / "kernel.log", "w") as log:  # (the kernel's own warnings, out of the suite's output)
        try:
            client.execute(env={**env, "TMPDIR": str(temp)}, stderr=log)
        except Exception as e:
            raise RouteFailed(f"the hosted kernel: {e}\n{(work / 'kernel.log').read_text()[-2000:]}") from None
    steps.took("the first cell (%pip install) and lesson 1, in a real kernel", started)
    text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    return {"text": text, "errors": len(errors),
            "left": sorted(str(p.relative_to(content)) for p in content.rglob("*")),
            "left_in_temp": sorted(str(p.relative_to(temp)) for p in temp.rglob("*"))}


def learner_commands(venv: Path, work: Path, steps: Steps) -> dict:
    """What a learner types after the install, from a folder outside the clone: ``grade`` of Unit
    1's references as their file, a practice set left at once, two drill questions, ``progress``."""
    outside, bin_ = work / "learner", venv / "bin"
    env = learner_env(work / "home")
    shutil.copy(ROOT / "solutions" / "unit1.py", outside / "unit1.py")
    python = str(bin_ / "python")
    out = {"grade": steps.run("python -m autograder grade unit1.py --unit 1",
                              [python, "-m", "autograder", "grade", "unit1.py", "--unit", "1"], cwd=outside, env=env)}
    out["practice"] = steps.run("python -m autograder practice (left at once)",
                                [python, "-m", "autograder", "practice", "--unit", "1", "--count", "1", "--seed", "4",
                                 "--workspace", str(outside / "practice")], cwd=outside, env=env, input="q\n")
    out["drill"] = steps.run("python -m autograder drill", [python, "-m", "autograder", "drill", "--count", "2",
                                                            "--seed", "5"], cwd=outside, env=env, input="1\n?\n")
    out["progress"] = steps.run("python -m autograder progress", [python, "-m", "autograder", "progress"],
                                cwd=outside, env=env)
    return out


# The suite's run: the installs and the hosted route in a thread, the results by key (each Python's
# version, and "hosted"), each with its own folder and steps.
_RUN: dict = {}


def start() -> None:
    """Start the run (once a session): once the background gradings have ended (at once where the
    session started none), each Python's install, then the hosted route."""
    if _RUN:
        return
    folder = Path(tempfile.mkdtemp(prefix="ckpt-suite-pip-route-"))
    steps, results, done = Steps(), {}, threading.Condition()

    def keep(key: str, work) -> None:
        python = find_python(HOSTED_PYTHON if key == "hosted" else key)
        value = {"python": python, "work": str(folder / key), "began": time.time()}
        if python is not None:
            (folder / key).mkdir()
            first = len(steps.times)
            try:
                value.update(work(python, folder / key, steps))
            except Exception as e:  # (the test that reads it fails with it)
                value["error"] = f"{type(e).__name__}: {e}"
            value["steps"] = steps.times[first:]
        value["ended"] = time.time()
        with done:
            results[key] = value
            done.notify_all()

    def run() -> None:
        from tests import background

        try:
            background.wait()
        except TimeoutError:
            pass  # (the tests that read the background say so)
        for version in PYTHONS:
            keep(version, install)
        keep("hosted", hosted)

    thread = threading.Thread(target=run, name="pip-route", daemon=True)
    _RUN.update(folder=folder, steps=steps, results=results, done=done, thread=thread)
    thread.start()


def result(key: str, timeout: float = 1800.0) -> dict:
    """What the run left for ``key``, waiting for it (started now if it was not: a test run alone)."""
    start()
    with _RUN["done"]:
        if not _RUN["done"].wait_for(lambda: key in _RUN["results"], timeout=timeout):
            raise TimeoutError(f"the pip route's {key!r} took over {timeout:.0f} s; its steps so far: "
                               f"{_RUN['steps'].times}")
        return _RUN["results"][key]


def steps() -> Steps:
    start()
    return _RUN["steps"]


def stop() -> None:
    """At the session's end: whatever still runs killed, the environments removed."""
    if not _RUN:
        return
    _RUN["steps"].stop()
    _RUN["thread"].join(timeout=60)
    shutil.rmtree(_RUN["folder"], ignore_errors=True)
    _RUN.clear()
