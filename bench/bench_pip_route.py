"""The course without make, as the README's "Without make" says, in fresh virtual environments.

For each Python asked for (default: 3.12 and 3.13, found on PATH or under pyenv):

1. **pip**: ``python -m venv``, then ``pip install .`` of this repository (not editable), timed;
   then, from a folder outside the repository, ``python -m autograder grade`` of Unit 1's references
   as a learner's file (full marks, and the isolation level), the references and hidden tests
   installed beside the grader (they grade here), ``python -m autograder drill --help``
   and ``practice --help``, and JupyterLab started (``jupyter lab``) until its page answers.
2. **A hosted notebook** (Colab and the like), emulated: a second fresh environment with only
   ``ipykernel``, as a hosted kernel has; a real kernel of it runs, in a writable folder outside
   the repository, the README's first cell (``%pip install`` of the course, here from this
   repository's folder instead of its address) and then lesson 1 whole, headless. The lesson's
   first cell sets the 16 devices up before anything imports JAX.

It prints each step's time and fails on the first step that does not do what the README says.
Run: ``python bench/bench_pip_route.py`` (``--python 3.13`` for one; about 2 minutes a Python
here with pip's cache warm, more where its packages are downloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ckptlab.twohost import free_port  # noqa: E402

FIRST_CELL = "%pip install --quiet {source}"  # the README's hosted-notebook first cell, from a folder here


def find_python(version: str) -> str:
    """A python<version> that runs (pyenv's shims on PATH answer only for the versions set active)."""
    candidates = [str(p) for p in sorted(Path.home().glob(f".pyenv/versions/{version}*/bin/python{version}"))[::-1]]
    candidates += [c for c in (shutil.which(f"python{version}"),) if c]
    for candidate in candidates:
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit(f"no python{version} that runs, on PATH or under pyenv")


def step(what: str, cmd: list[str], **kw) -> tuple[float, str]:
    started = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, **kw)
    took = time.monotonic() - started
    if run.returncode != 0:
        raise SystemExit(f"{what} failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
    print(f"  {what}: {took:.0f} s", flush=True)
    return took, run.stdout


def pip_route(python: str, work: Path) -> dict:
    venv = work / "venv"
    out = {}
    out["venv_s"], _ = step("python -m venv", [python, "-m", "venv", str(venv)])
    bin_ = venv / "bin"
    out["pip_install_s"], _ = step("pip install . (not editable)", [str(bin_ / "pip"), "install", "--quiet", str(ROOT)])
    learner = work / "learner"
    learner.mkdir()
    shutil.copy(ROOT / "solutions" / "unit1.py", learner / "unit1.py")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out["grade_s"], graded = step("python -m autograder grade unit1.py --unit 1",
                                  [str(bin_ / "python"), "-m", "autograder", "grade", "unit1.py", "--unit", "1"],
                                  cwd=learner, env=env)
    assert "Total: 45/45" in graded, graded[-1500:]
    out["isolation"] = next(line for line in graded.splitlines() if line.startswith("Isolation:"))
    # What the README says the install ships, and why: grading on the learner's own machine needs the
    # references and hidden tests (a class's learners get the release bundle, which has neither).
    _, shipped = step("the references and hidden tests installed",
                      [str(bin_ / "python"), "-c", "import solutions.unit1, autograder.hidden.unit1, autograder; "
                       "print(autograder.__file__)"], cwd=learner, env=env)
    assert str(venv) in shipped, shipped
    for command in ("drill", "practice"):
        step(f"python -m autograder {command} --help", [str(bin_ / "python"), "-m", "autograder", command, "--help"],
             cwd=learner, env=env)
    port = free_port()
    lab = subprocess.Popen([str(bin_ / "jupyter"), "lab", "--no-browser", f"--port={port}", "--allow-root",
                            "--IdentityProvider.token=", f"--ServerApp.root_dir={learner}"],
                           cwd=learner, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.monotonic()
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=5) as r:
                    assert r.status == 200 and b"JupyterLab" in r.read()
                break
            except OSError:
                if lab.poll() is not None or time.monotonic() - started > 120:
                    raise SystemExit("jupyter lab did not answer in 120 s") from None
                time.sleep(0.5)
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    out["jupyter_lab_s"] = round(time.monotonic() - started, 1)
    print(f"  jupyter lab answered: {out['jupyter_lab_s']} s", flush=True)
    return out


def hosted_route(python: str, work: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient

    venv = work / "hosted"
    out = {}
    step("a hosted kernel's environment (venv + ipykernel)", [python, "-m", "venv", str(venv)])
    step("pip install ipykernel", [str(venv / "bin" / "pip"), "install", "--quiet", "ipykernel"])
    folder = work / "content"  # Colab's /content: writable, not the repository
    folder.mkdir()
    nb = nbformat.read(ROOT / "course" / "01_parameter_accounting.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(FIRST_CELL.format(source=ROOT)))
    spec = work / "kernels"
    kernel = spec / "hosted"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "hosted", "language": "python"}))
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="hosted", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec)]))
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "XLA_FLAGS")}
    client = NotebookClient(nb, km=km, timeout=900, resources={"metadata": {"path": str(folder)}})
    client.execute(env=env)
    out["first_cell_and_lesson_1_s"] = round(time.monotonic() - started)
    text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "16 CPU devices ready" in text, text[-2000:]
    left = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    assert not left, f"lesson 1 left {left[:10]} in its folder"
    print(f"  the first cell (%pip install) and lesson 1, in a real kernel: {out['first_cell_and_lesson_1_s']} s",
          flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", nargs="+", default=["3.12", "3.13"])
    args = parser.parse_args(argv)
    figures = {}
    for version in args.python:
        python = find_python(version)
        print(f"Python {version}: {python}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"ckpt-pip-{version}-") as tmp:
            figures[version] = {**pip_route(python, Path(tmp)), **hosted_route(python, Path(tmp))}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
