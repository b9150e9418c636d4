"""The references' own processes (autograder/engine/trusted_side.py): what they give back, how they
fail, and that the process that holds a class neither starts JAX nor keeps what its references used."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from autograder.engine import trusted_side
from autograder.wall.codec import JaxArray

HERE = "tests.engine.test_trusted_side"


# --- targets, run in the server's forked processes --------------------------------------------------

def counted(n: int, variable: str):
    yield os.getpid()
    yield from range(n)
    yield os.environ.get(variable), os.getcwd()


def raises(message: str):
    yield "before"
    raise KeyError(message)


def dies():
    yield "before"
    os.kill(os.getpid(), signal.SIGKILL)
    yield "never"


def unpicklable():
    yield threading.Lock()


def placed():
    yield JaxArray(np.arange(6.0).reshape(2, 3), {"sharding": {"kind": "named", "spec": ["x"]}, "shards": [[0, [1, 3]]]})


def sleeps(seconds: float):
    yield os.getpid()
    time.sleep(seconds)
    yield "slept"


# --- tests --------------------------------------------------------------------------------------------

def test_each_value_comes_back_in_order_from_another_process_with_the_graders_environment_of_the_call(
        monkeypatch, tmp_path):
    monkeypatch.setenv("CKPT_TRUSTED_SIDE_PROBE", "set before")
    list(trusted_side.parts(f"{HERE}:counted", 0, "PATH"))  # the server started before they change
    monkeypatch.setenv("CKPT_TRUSTED_SIDE_PROBE", "changed")
    monkeypatch.chdir(tmp_path)
    pid, *values, seen = trusted_side.parts(f"{HERE}:counted", 3, "CKPT_TRUSTED_SIDE_PROBE")
    assert pid != os.getpid() and values == [0, 1, 2] and seen == ("changed", str(tmp_path))
    # a process for each call: they end, and give back what they used
    again, *_ = trusted_side.parts(f"{HERE}:counted", 0, "PATH")
    assert again != pid


def test_an_exception_raised_there_is_raised_here_with_its_type_and_where_it_came_from():
    made = trusted_side.parts(f"{HERE}:raises", "no such case")
    assert next(made) == "before"
    with pytest.raises(KeyError, match="no such case") as raised:
        next(made)
    assert any("in the references' process" in note and "raise KeyError" in note for note in raised.value.__notes__)


def test_a_process_that_dies_is_a_failure_said_as_the_graders_and_the_next_call_works():
    made = trusted_side.parts(f"{HERE}:dies")
    assert next(made) == "before"
    with pytest.raises(trusted_side.ReferenceProcessFailed, match="ended without a result"):
        next(made)
    assert list(trusted_side.parts(f"{HERE}:counted", 1, "PATH"))[1] == 0


def test_a_value_that_does_not_pickle_is_a_failure_that_names_it():
    with pytest.raises(trusted_side.ReferenceProcessFailed, match="sending a result"):
        list(trusted_side.parts(f"{HERE}:unpicklable"))


def test_a_placed_arrays_placement_comes_back_with_its_values():
    """Expected values are NumPy arrays that remember how the reference placed them (codec.JaxArray):
    NumPy's own pickling keeps no attribute, and 3.3's reference then looked wrongly placed."""
    (got,) = trusted_side.parts(f"{HERE}:placed")
    assert type(got) is JaxArray and got.placement["sharding"]["spec"] == ["x"]
    np.testing.assert_array_equal(got, np.arange(6.0).reshape(2, 3))


def test_the_server_killed_is_started_again_and_a_call_under_way_fails_without_hanging():
    made = trusted_side.parts(f"{HERE}:sleeps", 30)
    child = next(made)
    server = trusted_side._SERVER["proc"]
    server.kill()
    server.wait()
    os.kill(child, signal.SIGKILL)  # (its parent gone, nothing else ends it)
    with pytest.raises(trusted_side.ReferenceProcessFailed):
        next(made)
    assert list(trusted_side.parts(f"{HERE}:counted", 1, "PATH"))[1] == 0
    assert trusted_side._SERVER["proc"].pid != server.pid


def test_no_worker_inherits_the_servers_socket():
    """Learner code never reaches the server: the grader's end of the pair is not inherited by any
    process it starts (the zygote, its workers), and the server's end is closed here once it started."""
    list(trusted_side.parts(f"{HERE}:counted", 0, "PATH"))
    ours = trusted_side._SERVER["socket"]
    assert not os.get_inheritable(ours.fileno())
    inode = os.readlink(f"/proc/self/fd/{ours.fileno()}")
    sockets = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
               if os.path.exists(f"/proc/self/fd/{fd}") and os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")]
    assert sockets.count(inode) == 1
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))"],
                           capture_output=True, text=True, close_fds=False, check=True)
    assert str(ours.fileno()) not in eval(child.stdout)  # noqa: S307 - our own child's list of numbers


@pytest.mark.slow
def test_the_process_holding_a_class_starts_no_jax_and_a_killed_references_process_is_the_graders_failure(tmp_path):
    """Unit 3 and 9.2 graded in a fresh process: every reference's work in processes of their own, so
    JAX is never imported there and its peak stays small; 9.2's references' process killed as it
    starts is that problem's grader failure (never a zero said to be the learner's), and only that
    problem's: 3.3's, in the next process, is graded."""
    script = textwrap.dedent(f"""
        import os, sys, threading, time
        sys.path.insert(0, {str(trusted_side.__file__.rsplit('/autograder/', 1)[0])!r})
        from autograder.engine import trusted_side
        from autograder.engine.grade import grade

        def kill_the_first_references_process():
            while "proc" not in trusted_side._SERVER:
                time.sleep(0.01)
            server = trusted_side._SERVER["proc"].pid
            while True:
                children = open(f"/proc/{{server}}/task/{{server}}/children").read().split()
                if children:
                    os.kill(int(children[0]), 9)
                    return
                time.sleep(0.002)

        if sys.argv[1] == "kill":
            threading.Thread(target=kill_the_first_references_process, daemon=True).start()
        report = grade([{str(tmp_path / 'unit3.py')!r}, {str(tmp_path / 'unit9.py')!r}], "tester",
                       problems=sys.argv[2].split(","))
        for p in report.problems:
            print("RESULT", p.id, p.status, p.category, p.score, p.message)
        # (this process's own high-water mark: ru_maxrss would keep the forked test process's from before exec)
        peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
        print("JAX", "jax" in sys.modules, "PEAK", peak // 1024)
    """)
    root = trusted_side.__file__.rsplit("/autograder/", 1)[0]
    for unit in (3, 9):
        (tmp_path / f"unit{unit}.py").write_text(open(f"{root}/solutions/unit{unit}.py").read())

    def run(mode: str, problems: str) -> tuple[dict, str]:
        out = subprocess.run([sys.executable, "-c", script, mode, problems], capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        results = {line.split()[1]: line.split(None, 5)[2:] for line in out.stdout.splitlines() if line.startswith("RESULT")}
        return results, next(line for line in out.stdout.splitlines() if line.startswith("JAX"))

    results, facts = run("keep", "3.1,3.2,3.3,3.4,9.2")
    assert all(r[0] == "correct" for r in results.values()), results
    jax_imported, peak = facts.split()[1], int(facts.split()[3])
    assert jax_imported == "False" and peak < 150, facts  # (it held 460 MiB with the references run here)

    # 9.2's references first (the plans run in the order asked), their process killed as soon as it is seen
    killed, _ = run("kill", "9.2,3.3")
    status, category, score, message = killed["9.2"]
    assert (status, category, float(score)) == ("error", "grader", 0.0), killed["9.2"]
    assert "The grader itself failed on this problem (ReferenceProcessFailed)" in message
    assert killed["3.3"][0] == "correct", killed
