"""The course without make, as the README's "Without make: pip, and hosted notebooks" says, in fresh
virtual environments: the steps tests/learner/test_pip_route.py checks and bench/bench_pip_route.py
times.

- **pip** (``install``): the clone's tracked files copied to a folder of their own (what a fresh
  clone holds; pip's in-tree build writes its ``build/`` and ``egg-info`` there, never here), then
  ``python -m venv`` and ``pip install .`` in that copy; from a folder outside it, the installed
  package holds each of the course's files (the references and hidden tests among them, which the
  README says it ships, and why), and the README's own ``jupyter lab`` line, run as it is, opens
  the course with ``problems/`` beside it. (``learner_commands``, run by the test itself: ``grade`` of Unit 1's references as a
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

import contextlib
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


def learner_env(work: Path) -> dict:
    """A learner's shell: none of the suite's own settings (its path to this repository, its venv,
    its devices); progress kept in ``work/home``, temporary files (pip's builds among them) in
    ``work/tmp``, so that a run cut short leaves nothing outside ``work``."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "XLA_FLAGS", "CKPT_COURSE_HOME", "JUPYTER_CONFIG_PATH")
    (work / "tmp").mkdir(exist_ok=True)
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "CKPT_COURSE_HOME": str(work / "home"),
            "TMPDIR": str(work / "tmp")}


class Steps:
    """Each step's time, in order; a step that fails raises RouteFailed saying which and why. Every
    process a step starts (in a session of its own) and the hosted kernel are killed by stop(), from
    any thread: a run cut short leaves nothing running."""

    def __init__(self, echo: bool = False):
        self.times: list[tuple[str, float]] = []
        self.echo = echo
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.kernels: set = set()  # (jupyter_client KernelManagers)
        self.stopped = False

    def spawn(self, cmd: list[str], **kw) -> subprocess.Popen:
        with self.lock:  # (stop() sees every process started before it, and none starts after it)
            if self.stopped:
                raise RouteFailed("stopped: the session has ended")
            proc = subprocess.Popen(cmd, start_new_session=True, **kw)
            self.live.add(proc)
            return proc

    def ended(self, proc: subprocess.Popen) -> None:
        with self.lock:
            self.live.discard(proc)

    def run(self, what: str, cmd: list[str], timeout: float = 900, input: str | None = None, **kw) -> str:
        started = time.monotonic()
        proc = self.spawn(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
        try:
            out, _ = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            out, _ = proc.communicate()
            raise RouteFailed(f"{what}: still running after {timeout:.0f} s:\n{out[-3000:]}") from None
        except BaseException:  # (Ctrl-C: the step's processes go with it)
            _kill(proc)
            raise
        finally:
            self.ended(proc)
        if proc.returncode != 0:
            raise RouteFailed(f"{what} failed (exit code {proc.returncode}):\n{out[-3000:]}")
        self.took(what, started)
        return out

    def took(self, what: str, started: float) -> None:
        self.times.append((what, round(time.monotonic() - started, 1)))
        if self.echo:
            print(f"  {what}: {self.times[-1][1]:.0f} s", flush=True)

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            live, kernels = list(self.live), list(self.kernels)
        for proc in live:
            _kill(proc)
        for km in kernels:  # (jupyter_client starts a kernel in a session of its own)
            group = getattr(km.provisioner, "pgid", None) if km.provisioner is not None else None
            if group:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)


def _kill(proc: subprocess.Popen) -> None:
    """``proc``'s whole session killed (each step's process leads one)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def clone_copy(target: Path) -> Path:
    """The repository's tracked files (as a fresh clone has them) copied into ``target``."""
    from autograder.exports.hub import copy_tracked

    if not (ROOT / ".git").exists():  # (a downloaded archive holds what the repository tracks)
        shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(".venv", "__pycache__", "build", "*.egg-info",
                                                                    ".pytest_cache", ".hypothesis"))
        return target
    copy_tracked(ROOT, target)
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
    env = learner_env(work)
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


README_LAB = 'JUPYTER_CONFIG_PATH="$PWD/jupyter_config" jupyter lab'  # what the README's lines must say


def readme_blocks() -> dict[str, str]:
    """The README's commands without make: its "Without make" and "With conda instead" blocks."""
    text = (ROOT / "README.md").read_text()
    blocks = {}
    for title in ("### Without make", "### With conda instead"):
        section = text[text.index(title):]
        begin = section.index("```bash") + len("```bash")
        blocks[title.removeprefix("### ")] = section[begin:section.index("```", begin)]
    return blocks


def readme_lab_lines() -> list[str]:
    """Each block's ``jupyter lab`` line, without its comment."""
    return [line.split("#", 1)[0].strip() for block in readme_blocks().values() for line in block.splitlines()
            if "jupyter lab" in line]


def jupyter_lab(venv: Path, clone: Path, env: dict, steps: Steps) -> dict:
    """The README's ``jupyter lab`` line (its "Without make" block's), run as it is in bash in the
    clone with the venv active, until its page answers; then where it opens, and what it serves. A
    port another process took first: tried again on another (never a port Jupyter picks itself)."""
    from ckptlab.twohost import free_port, stop_group

    line = readme_lab_lines()[0]
    for _attempt in range(3):
        port = free_port()
        command = (f"{line} --no-browser --port={port} --ServerApp.port_retries=0 --IdentityProvider.token="
                   + " --allow-root" * (os.geteuid() == 0))
        started = time.monotonic()
        lab = steps.spawn(["bash", "-c", command], cwd=clone, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env={**env, "VIRTUAL_ENV": str(venv),  # (as `. venv/bin/activate` leaves a shell)
                               "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}"})
        try:
            answered = _lab_answers(lab, f"http://127.0.0.1:{port}", started)
        finally:
            stop_group(lab)
            steps.ended(lab)
        if answered is not None:
            steps.took("jupyter lab answered", started)
            return answered
    raise RouteFailed("jupyter lab ended at once three times (is its port taken, or the line wrong?)")


def _lab_answers(lab: subprocess.Popen, url: str, started: float) -> dict | None:
    """Where ``lab`` opens and what it serves, once it answers; None if it ended first."""
    while True:
        try:
            with urllib.request.urlopen(url + "/", timeout=5) as r:  # (redirected to its default page)
                opens, page = r.geturl().removeprefix(url), r.read().decode(errors="replace")
            break
        except OSError:
            if lab.poll() is not None:
                return None
            if time.monotonic() - started > 180:
                raise RouteFailed("jupyter lab did not answer in 180 s") from None
            time.sleep(0.5)
    served = {}
    for path in ("course/00_start_here.ipynb", "problems"):
        try:
            with urllib.request.urlopen(f"{url}/api/contents/{path}?content=0", timeout=30) as r:
                served[path] = json.loads(r.read())["type"]
        except urllib.error.HTTPError as e:
            served[path] = e.code
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
    env = learner_env(work)  # (its TMPDIR, temp: the kernel's, which the lesson must leave as it found it)
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
    with steps.lock:
        if steps.stopped:
            raise RouteFailed("stopped: the session has ended")
        steps.kernels.add(km)
    with open(work / "kernel.log", "w") as log:  # (the kernel's own warnings, out of the suite's output)
        try:
            client.execute(env=env, stderr=log)  # (given km=, nbclient leaves the kernel running: shut below)
        except Exception as e:
            raise RouteFailed(f"the hosted kernel: {e}\n{(work / 'kernel.log').read_text()[-2000:]}") from None
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
            with steps.lock:
                steps.kernels.discard(km)
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
    env = learner_env(work)
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
# version, and "hosted"), each with its own folder; every Steps of the run is stopped with it.
_RUN: dict = {}
KEYS = (*PYTHONS, "hosted")


def collected_keys(items) -> list[str]:
    """The keys the collected tests marked ``pip_route`` read: a parametrized one's ``version``,
    else the hosted route."""
    keys = {getattr(item, "callspec", None) and item.callspec.params.get("version") or "hosted" for item in items}
    return [key for key in KEYS if key in keys]


def start(keys=KEYS) -> None:
    """Start the run of ``keys`` (once a session): once the background gradings have ended (at once
    where the session started none), each in turn."""
    if _RUN:
        return
    folder = Path(tempfile.mkdtemp(prefix="ckpt-suite-pip-route-"))
    steps, results, done, working = Steps(), {}, threading.Condition(), threading.Event()

    def keep(key: str) -> None:
        python = find_python(HOSTED_PYTHON if key == "hosted" else key)
        value = {"python": python, "work": str(folder / key), "began": time.time()}
        if python is not None:
            (folder / key).mkdir()
            first = len(steps.times)
            try:
                value.update((hosted if key == "hosted" else install)(python, folder / key, steps))
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
        except Exception:  # (a background run over its time, or stopped at the session's end: its readers say so)
            pass
        working.set()  # (before looking at stopped: stop() sets stopped, then looks at working)
        for key in keys:
            if steps.stopped:
                return
            keep(key)

    thread = threading.Thread(target=run, name="pip-route", daemon=True)
    _RUN.update(folder=folder, keys=tuple(keys), steps=[steps], results=results, done=done, thread=thread,
                working=working)
    thread.start()


def result(key: str, timeout: float = 1800.0) -> dict:
    """What the run left for ``key``, waiting for it (started now if it was not: a test run alone)."""
    start([key])
    if key not in _RUN["keys"]:
        raise RuntimeError(f"this session's pip route runs {_RUN['keys']}, not {key!r}: mark the test that reads "
                           "it @pytest.mark.pip_route")
    with _RUN["done"]:
        if not _RUN["done"].wait_for(lambda: key in _RUN["results"], timeout=timeout):
            raise TimeoutError(f"the pip route's {key!r} took over {timeout:.0f} s; the steps so far: "
                               f"{_RUN['steps'][0].times}")
        return _RUN["results"][key]


def steps() -> Steps:
    """Steps for a test's own commands, stopped with the run at the session's end."""
    start([])
    made = Steps()
    _RUN["steps"].append(made)
    return made


def stop() -> None:
    """At the session's end: whatever still runs killed, the environments removed."""
    if not _RUN:
        return
    for each in _RUN["steps"]:
        each.stop()
    if _RUN["working"].is_set():  # (its step ends with its killed process; one still waiting starts nothing)
        _RUN["thread"].join(timeout=15)  # (a kernel killed mid-cell can keep nbclient waiting longer: left)
    shutil.rmtree(_RUN["folder"], ignore_errors=True)
    _RUN.clear()
