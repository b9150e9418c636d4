"""What the start notebook and the README tell a learner to type, typed where they type it: in a
terminal of the JupyterLab that `make lab` starts (opened through the server's terminals API, as
JupyterLab's File > New > Terminal does), and `make check` in a shell, whose results come one by one
as they are graded."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder import registry
from ckptlab.twohost import free_port, stop_group
from tests.conftest import ROOT

TOKEN = "learner-paths"
DECOY = "decoy python: not the course's"


def _home(home: Path) -> dict:
    """A learner's home whose start-up files put another Python first (as pyenv's or conda's do),
    and the environment of the shell that runs `make lab`: no venv on PATH, none of make's or this
    test run's Jupyter settings."""
    decoy = home / "decoy" / "bin"
    decoy.mkdir(parents=True)
    (decoy / "python").write_text(f"#!/bin/sh\necho \"{DECOY}\"\nexit 3\n")
    (decoy / "python").chmod(0o755)
    line = f'PATH="{decoy}:$PATH"; export PATH\n'
    for rc in (".bashrc", ".profile", ".zshrc", ".shrc"):
        (home / rc).write_text(line)
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "MAKE", "MFLAGS", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(HOME=str(home), SHELL=shutil.which("bash") or "/bin/sh", ENV=str(home / ".shrc"))
    return env


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` as a learner starts it (the Makefile's own recipe); its address."""
    if not (ROOT / ".venv" / ".installed").exists():
        pytest.skip("needs the course's .venv (make venv)")
    port = free_port()
    home = tmp_path_factory.mktemp("home")
    # -o: never rebuild the shared .venv here, whatever pyproject.toml's time.
    args = f"--no-browser --port={port} --ServerApp.token={TOKEN}"
    proc = subprocess.Popen(["make", "-s", "-o", ".venv/.installed", "lab", f"LAB_ARGS={args}"], cwd=ROOT,
                            env=_home(home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, "make lab stopped"
                time.sleep(0.5)
        else:
            raise AssertionError("JupyterLab did not start")
        yield base
    finally:
        stop_group(proc)


_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>()][0-9A-B]?")


class Terminal:
    """A JupyterLab terminal: made with POST /api/terminals, typed into through its websocket."""

    def __init__(self, base: str, shell: str):
        import websocket

        body = json.dumps({"cwd": "course", "extra_env": {"SHELL": shell}}).encode()  # opened from course/
        request = urllib.request.Request(f"{base}/api/terminals", data=body, method="POST",
                                         headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
        self.base, self.name = base, json.loads(urllib.request.urlopen(request, timeout=30).read())["name"]
        self.ws = websocket.create_connection(f"{base.replace('http', 'ws')}/terminals/websocket/{self.name}"
                                              f"?token={TOKEN}", timeout=5)
        self.ws.send(json.dumps(["set_size", 50, 250, 800, 2000]))
        self.text, self.n = "", 0

    def run(self, command: str, timeout: float = 120) -> tuple[int, str]:
        """Type ``command`` and Enter; its exit status and what it printed."""
        import websocket

        self.n += 1
        # The markers are quoted apart, so the terminal's echo of the line never holds them whole.
        self.ws.send(json.dumps(["stdin", f"echo '@@{self.n}''b'; {command}; echo '@@{self.n}''e:'$?\r"]))
        done = re.compile(rf"@@{self.n}b\r?\n(.*?)@@{self.n}e:(\d+)", re.S)
        end = time.monotonic() + timeout
        while not (m := done.search(self.text)):
            assert time.monotonic() < end, f"no answer to {command!r}:\n{self.text[-3000:]}"
            try:
                message = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            if message[0] == "stdout":
                self.text += _ESCAPES.sub("", message[1])
            elif message[0] == "disconnect":
                raise AssertionError(f"the terminal's shell ended:\n{self.text[-3000:]}")
        return int(m.group(2)), m.group(1).replace("\r", "")

    def close(self) -> None:
        self.ws.close()
        request = urllib.request.Request(f"{self.base}/api/terminals/{self.name}", method="DELETE",
                                         headers={"Authorization": f"token {TOKEN}"})
        urllib.request.urlopen(request, timeout=30)


SHELLS = [pytest.param(name, marks=pytest.mark.skipif(not shutil.which(name), reason=f"no {name} here"))
          for name in ("bash", "zsh", "dash")]


@pytest.mark.slow
@pytest.mark.parametrize("shell", SHELLS)
def test_a_lab_terminal_runs_the_course_commands_in_the_course_environment(lab, shell):
    """The learner's shell reads their start-up files (here they put a decoy Python first, and
    JupyterLab's default login shell resets PATH from /etc/profile): `python`, `python -m
    autograder ...` and `make ...` are still the course's, at the top of the repository."""
    term = Terminal(lab, shutil.which(shell))
    try:
        rc, out = term.run('python -c "import sys; print(sys.prefix)"')
        assert DECOY not in out and (rc, out.strip()) == (0, str(ROOT / ".venv")), out
        rc, out = term.run("pwd")
        assert (rc, out.strip()) == (0, str(ROOT)), out  # opened from course/: starts at the top, where make runs
        rc, out = term.run("python -m autograder --help")
        assert rc == 0 and "The course autograder" in out and "practice" in out, out
        rc, out = term.run('python -c "import nbformat, autograder.learner.practice; print(\'practice ready\')"')
        assert (rc, out.strip()) == (0, "practice ready"), out  # what `practice` died of: No module named 'nbformat'
        rc, out = term.run("python -m autograder list | tail -n 1")
        assert rc == 0 and f"In all: {len(registry.PROBLEMS)} problems" in out, out
        # (-o: as in the fixture, never rebuild the shared .venv from a test)
        rc, out = term.run("make -s -o .venv/.installed progress")
        assert rc == 0 and "Traceback" not in out and "progress" in out.lower(), out  # (whatever the store holds)
        rc, out = term.run("echo $VIRTUAL_ENV")
        assert out.strip() == str(ROOT / ".venv")
        # What the start notebook says to type for practice, typed here: a set starts (its first prompt and
        # its practice file), and q stops it without grading.
        before = set((ROOT / "practice").glob("session-*.py"))
        try:
            rc, out = term.run("echo q | make -s -o .venv/.installed practice MINUTES=10 UNIT=1")
            assert rc == 0 and "Practice: 1 problem(s)" in out and "[1/1] Problem 1." in out, out
            assert "Stopped without grading" in out and "ModuleNotFoundError" not in out, out
        finally:
            for path in set((ROOT / "practice").glob("session-*.py")) - before:
                path.unlink()
    finally:
        term.close()


# --- grading that talks while it works ------------------------------------------------------------

def _unit1_work(folder: Path, flag: Path) -> Path:
    """A learner's Unit 1: the references for 1.1 and 1.2, 1.3 still its stub, and a 1.4 that gives
    the right answer only once ``flag`` exists (it waits 20 s at most, then answers None)."""
    source = (ROOT / "solutions" / "unit1.py").read_text()
    source = source.replace("def param_bytes(", "def _param_bytes_done_later(")
    source = source.replace("def nnx_param_table(", "def _reference_table(")
    source += f'''

def param_bytes(params, dtype):
    raise NotImplementedError


_SEEN = []


def nnx_param_table(seed, layer_sizes):
    import os
    import time

    if not _SEEN:
        for _ in range(400):
            if os.path.exists({str(flag)!r}):
                break
            time.sleep(0.05)
        _SEEN.append(os.path.exists({str(flag)!r}))
    return _reference_table(seed, layer_sizes) if _SEEN[0] else None
'''
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "unit1_work.py").write_text(source)
    shutil.copy(ROOT / "problems" / registry.UNITS[2].notebook, folder)  # another unit, not attempted
    return folder


@pytest.mark.slow
def test_check_of_one_unit_prints_each_result_as_it_is_graded(tmp_path):
    """`make check UNIT=1`'s command on a folder: each problem's line comes while the others are
    still being graded (1.4 answers right only once the test has read 1.1's line), only Unit 1,
    and the problems not attempted on one line."""
    flag = tmp_path / "go"
    work = _unit1_work(tmp_path / "work", flag)
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "autograder", "grade", str(work), "--unit", "1", "--learner", "ada",
                             "--no-record", "--json", str(out)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("1.1 "):
            flag.touch()  # 1.4 may now finish: this line came before it was graded
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    text = "\n".join(lines)
    live = [x for x in lines[:lines.index("")] if re.match(r"\d\.\d ", x)]
    assert sorted(x.split()[0] for x in live) == ["1.1", "1.2", "1.4"], text
    assert all(x.split()[2] == "correct" for x in live), text  # 1.4 too: 1.1's line was read before it
    assert lines[0] == "Learner: ada (this id chooses your hidden cases)"
    assert "Grading Unit 1 in" in lines[1] and "4 problems, 45 points" in lines[1]
    assert set(re.findall(r"^(\d)\.\d ", text, re.M)) == {"1"}, text  # no other unit's problem, not even as not attempted
    assert "No function named" not in text
    (not_attempted,) = [x for x in lines if x.startswith("Not attempted")]
    assert not_attempted == "Not attempted: 1 problem, 10 points (1.3)"
    assert "Total: 35/45" in text
    data = json.loads(out.read_text())  # the JSON is as before: every chosen problem, in order
    assert [p["id"] for p in data["problems"]] == ["1.1", "1.2", "1.3", "1.4"] and data["score"] == 35


def test_make_check_takes_unit_and_only(root):
    """`make check UNIT=1 ONLY=2.5` on the committed stubs: those five problems, nothing run."""
    proc = subprocess.run(["make", "-s", "-o", ".venv/.installed", "check", "UNIT=1", "ONLY=2.5"], cwd=root,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "Grading Unit 1, 2.5 in problems/: 5 problems, 65 points" in lines[1]
    assert "Not attempted: 5 problems, 65 points (1.1-1.4, 2.5)" in lines
    assert len(lines) < 10 and "No function named" not in proc.stdout, proc.stdout


def test_grading_one_notebook_reports_its_own_problems(tmp_path):
    """A unit's problem notebook, alone: its problems, none of another unit's."""
    notebook = ROOT / "problems" / registry.UNITS[2].notebook
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(notebook), "--no-record", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    unit2 = [p.id for p in registry.PROBLEMS if p.unit == 2]
    assert [p["id"] for p in json.loads(out.read_text())["problems"]] == unit2
    assert "No function named" not in proc.stdout and "1.1" not in proc.stdout, proc.stdout
    assert f"Not attempted: {len(unit2)} problems, 90 points (2.1-2.6)" in proc.stdout
    # Renamed, it is known by the functions it defines.
    renamed = tmp_path / "my_copy.ipynb"
    nbformat.write(nbformat.read(notebook, as_version=4), renamed)
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(renamed), "--no-record"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert "Grading Unit 2 in" in proc.stdout and "No function named" not in proc.stdout, proc.stdout


def test_on_result_reports_each_result_once_as_the_report_has_it(grade_code):
    """The engine's callback: each problem's final result, the ones decided without running first;
    the report itself unchanged (in the course's order)."""
    source = (ROOT / "solutions" / "unit1.py").read_text()
    seen = []
    report = grade_code(source, problems=["1.1", "1.2", "2.1"], on_result=seen.append)
    assert [p.id for p in report.problems] == ["1.1", "1.2", "2.1"]
    assert seen[0].id == "2.1" and seen[0].status == "not_attempted"
    assert sorted(r.id for r in seen) == ["1.1", "1.2", "2.1"]
    assert {r.id: r for r in seen} == {r.id: r for r in report.problems}


def _commands_taught() -> list[str]:
    """The `make ...` commands the start notebook's text and the README's learner blocks give."""
    nb = nbformat.read(ROOT / "course" / "00_start_here.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    found = re.findall(r"`(make [^`]+)`", text)
    readme = (ROOT / "README.md").read_text().split("## For instructors")[0]
    for block in re.findall(r"```bash\n(.*?)```", readme, re.S):
        found += [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("make ")]
    return found


def test_the_commands_the_start_notebook_and_readme_teach_are_make_targets():
    """Each works from a plain shell at the top of the repository (`python` there need not be the
    course's, so the start notebook names no `python -m autograder` command)."""
    taught = _commands_taught()
    assert {"make check UNIT=1", "make practice MINUTES=30", "make drill", "make progress"} <= set(taught), taught
    for command in taught:
        proc = subprocess.run(["make", "-n", "-o", ".venv/.installed", *command.split()[1:]], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "No rule" not in proc.stderr, (command, proc.stderr)
    nb = nbformat.read(ROOT / "course" / "00_start_here.ipynb", as_version=4)
    assert not any("python -m autograder" in c.source for c in nb.cells if c.cell_type == "markdown")


def test_on_result_waits_for_a_worker_tried_again(grade_code, monkeypatch):
    """A worker the machine's memory killed is tried again alone: the callback hears only the
    result of the second try, once."""
    from autograder.engine import grade as engine
    from autograder.sandbox import RunResult

    real, calls = engine.runners.run, []

    def run(plan, level):
        calls.append(plan.problem.id)
        if plan.problem.id == "1.1" and calls.count("1.1") == 1:
            return RunResult("machine_killed", returncode=137)
        return real(plan, level)

    monkeypatch.setattr(engine.runners, "run", run)
    seen = []
    report = grade_code((ROOT / "solutions" / "unit1.py").read_text(), problems=["1.1", "1.2"], on_result=seen.append)
    assert calls.count("1.1") == 2
    assert sorted(r.id for r in seen) == ["1.1", "1.2"] and seen[-1].id == "1.1"
    assert [r.status for r in report.problems] == ["correct", "correct"] and seen[-1] is report.problems[0]
