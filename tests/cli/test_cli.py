"""The command line, as `make check` and instructors use it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder import registry

pytestmark = pytest.mark.slow


def test_grade_cli_writes_the_documented_json(root, tmp_path):
    out = tmp_path / "r" / "result.json"
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(root / "problems"), "--learner", "ada",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr
    total = sum(p.points for p in registry.PROBLEMS)
    n = len(registry.PROBLEMS)
    assert f"Not attempted: {n} problems, {total} points (1.1-1.4, " in proc.stdout and f"Total: 0/{total}" in proc.stdout
    assert "No function named" not in proc.stdout and "Problem  Function" not in proc.stdout  # nothing attempted: no table
    data = json.loads(out.read_text())
    assert set(data) == {"learner", "score", "max_score", "isolation", "problems"}
    assert data["learner"] == "ada" and data["score"] == 0 and data["max_score"] == total
    assert data["isolation"].startswith("none")  # stubs only: no learner code ran, no level was needed
    for p in data["problems"]:
        assert set(p) == {"id", "function", "status", "score", "max_score", "message"}
        assert p["status"] == "not_attempted"


def test_grade_cli_rejects_missing_paths_clearly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr


def test_list_shows_every_problem():
    proc = subprocess.run([sys.executable, "-m", "autograder", "list"], capture_output=True, text=True, timeout=60)
    assert "dense_checkpoint_accounting(seed, x, num_shards, features)" in proc.stdout
    assert "orbax_save_count(seed, x, features, num_shards)" in proc.stdout


def test_make_lab_serves_the_course(root):
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = f"--no-browser --port {port} --ServerApp.token=test --ServerApp.open_browser=False"
    proc = subprocess.Popen(["make", "-s", "lab", f"LAB_ARGS={args}"], cwd=root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        body = None
        for _ in range(120):
            try:
                url = f"http://127.0.0.1:{port}/api/contents/course?token=test"
                body = json.loads(urllib.request.urlopen(url, timeout=2).read())
                break
            except OSError:
                time.sleep(0.5)
        assert body is not None, "JupyterLab did not start"
        assert "00_start_here.ipynb" in {c["name"] for c in body["content"]}
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=test", timeout=5)
        assert page.status == 200
    finally:
        from ckptlab.twohost import stop_group

        stop_group(proc)
