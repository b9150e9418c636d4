"""Every lesson writes its files under one folder from ``ckptlab.workdir.lesson_workdir``, and that
folder is gone once the kernel ends, however it ended: after a failing cell (``nbclient`` shuts the
kernel down), a restart, and a kill, where no code of the kernel's runs."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "course").glob("*.ipynb"))
# Where a lesson could make a folder of its own, outside the helper.
ELSEWHERE = re.compile(r"\btempfile\b|mkdtemp|measured_tempdir|TemporaryDirectory|gettempdir|[\"']/tmp|[\"']/var/tmp"
                       r"|Path\.home|expanduser|os\.getcwd|Path\.cwd")


def _code(path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def test_every_lesson_makes_its_folder_with_the_helper_only():
    writers = []
    for path in LESSONS:
        cells = _code(path)
        for source in cells:
            found = ELSEWHERE.search(source)
            assert not found, f"{path.name} makes a folder of its own ({found.group()!r}): use ckptlab.workdir.lesson_workdir"
        calls = sum(s.count("lesson_workdir(") for s in cells)
        assert calls <= 1, f"{path.name} makes {calls} work folders: one, with every file under it"
        if calls:
            writers.append(path.name)
    # every lesson but the first writes checkpoints (the control: the helper is found where it is used)
    assert writers == [p.name for p in LESSONS if not p.name.startswith("00_")], writers


def _left(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _wait_empty(folder: Path, seconds: float = 10.0) -> list[str]:
    end = time.monotonic() + seconds
    while _left(folder) and time.monotonic() < end:
        time.sleep(0.05)
    return _left(folder)


@pytest.mark.slow
def test_a_lesson_stopped_by_a_failing_cell_leaves_nothing(tmp_path, monkeypatch):
    # Lesson 8's own cells up to the one that makes its folder, then a cell that writes into it as the
    # lesson's runs do, then a cell made to fail: nbclient stops there and shuts the kernel down.
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    nb = nbformat.read(ROOT / "course" / "08_preemption.ipynb", as_version=4)
    upto = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "lesson_workdir(" in c.source)
    nb.cells = [c for c in nb.cells[:upto + 1] if c.cell_type == "code"] + [
        nbformat.v4.new_code_cell("(workdir / 'run').mkdir()\n(workdir / 'run' / 'host0.log').write_text('x')\n"
                                  "print('wrote', sorted(p.name for p in workdir.rglob('*')))"),
        nbformat.v4.new_code_cell("raise RuntimeError('a cell made to fail')")]
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "course")}})
    with pytest.raises(CellExecutionError, match="a cell made to fail"):
        client.execute()
    wrote = "".join(o.get("text", "") for o in nb.cells[-2].outputs)
    assert "wrote ['host0.log', 'run']" in wrote, wrote  # the control: the lesson wrote, into the temp folder
    assert _left(temp) == [], "nbclient's shutdown left the folder"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["restart", "kill"])
def test_the_folder_goes_when_the_kernel_is_restarted_or_killed(tmp_path, monkeypatch, ending):
    from jupyter_client.manager import start_new_kernel

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        reply = kc.execute_interactive("from ckptlab.workdir import lesson_workdir\n"
                                       "workdir = lesson_workdir('unit-')\n(workdir / 'f').write_text('x')", timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        assert len(_left(temp)) == 2  # the control: the folder and its file are there while the kernel lives
        if ending == "restart":  # as Jupyter's "Restart kernel": a shutdown request, then a new kernel
            km.restart_kernel(now=False)
            assert _left(temp) == [], "the folder outlived a restart"
        else:  # SIGKILL to the kernel's process group: no code of the kernel's runs; the watcher does it
            km.signal_kernel(signal.SIGKILL)
            assert _wait_empty(temp) == [], "the folder outlived a killed kernel"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
