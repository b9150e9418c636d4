"""Memory measured from the trusted side (Unit 6): the grader reads the kernel's peak resident set
of the process running the learner's code, above the set it had before that code loaded. A learner
gains nothing by resetting the peak, by moving the work to a child or a new program, by allocating
before its function runs, by naming its process to look like a status line, or by paging memory
out: at the strict level each of these is refused or counted.

Each hostile test runs its attack at the strict level and, where the jail is what stops it, at the
basic level too (no jail), where the attack must work: that shows the jail, not a broken attack,
makes the strict test pass."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from autograder import sandbox
from tests.conftest import best_isolation

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="peaks are read from /proc")]

MiB = 2**20
BIG = 300  # MiB the attacks allocate; an honest worker's own noise is a few MiB
COUNTED = 0.95 * BIG * MiB  # (what the process held before may shrink a little meanwhile)


def _peak(source: str, level: str, function: str = "f") -> tuple[int | None, object]:
    worker = sandbox.Worker(source, function, [()], level=level, measure_memory=True, timeout=60)
    run = worker.wait()
    assert run.status == "ok" and not run.setup, (run.status, run.setup, run.stderr_tail)
    (case,) = run.cases
    return case.get("peak_bytes"), case.get("value", case.get("error"))


def _strict() -> str:
    level = best_isolation()
    if level != sandbox.STRICT:
        pytest.skip("no strict level on this machine")
    return level


_HONEST = f"""
import numpy as np

def f():
    a = np.ones({BIG} * 2**20, np.uint8)
    return int(a[::4096].sum() > 0)
"""


def test_an_allocation_is_counted_and_a_small_function_costs_little():
    level = _strict()
    peak, value = _peak(_HONEST, level)
    assert value == 1 and COUNTED <= peak < (BIG + 20) * MiB
    small, _ = _peak("def f():\n    return 1\n", level)
    assert small < 8 * MiB  # what the worker held before the code loaded is not the learner's


_RESET = f"""
import numpy as np

def f():
    a = np.ones({BIG} * 2**20, np.uint8)
    del a
    try:
        with open("/proc/self/clear_refs", "w") as out:
            out.write("5")   # resets this process's peak resident set to its present one
        return "reset"
    except OSError:
        return "refused"
"""


def test_resetting_the_peak_is_refused():
    peak, value = _peak(_RESET, _strict())
    assert value == "refused" and peak >= COUNTED
    # Without the jail the reset works, and the peak the grader reads is gone.
    peak, value = _peak(_RESET, sandbox.BASIC)
    assert value == "reset" and peak < BIG * MiB // 2


_CHILD = f"""
import os
import numpy as np

def f():
    try:
        pid = os.fork()
    except OSError:
        a = np.ones({BIG} * 2**20, np.uint8)   # refused: the work is done here, and counted
        return "refused"
    if pid == 0:
        a = np.ones({BIG} * 2**20, np.uint8)
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"
"""


def test_a_child_process_cannot_do_the_work_uncounted():
    peak, value = _peak(_CHILD, _strict())
    assert value == "refused" and peak >= COUNTED
    peak, value = _peak(_CHILD, sandbox.BASIC)
    assert value == "forked" and peak < BIG * MiB // 2  # without the jail: a peak the grader never saw


_EXEC = """
import os
import sys

import numpy as np

def f():
    try:
        os.execv(sys.executable, [sys.executable, "-c", "pass"])   # a new program starts a new peak
    except OSError:
        return "refused"
"""


def test_a_new_program_cannot_start_a_new_peak():
    _, value = _peak(_EXEC, _strict())
    assert value == "refused"
    # Without the jail the exec happens: the process is another program, which never answers.
    run = sandbox.Worker(_EXEC, "f", [()], level=sandbox.BASIC, measure_memory=True, timeout=30).wait()
    assert not run.cases or "value" not in run.cases[0]


_BEFORE = f"""
import numpy as np

_held = np.ones({BIG} * 2**20, np.uint8)   # allocated while the module loads, freed in the function

def f():
    global _held
    _held = None
    b = np.ones({BIG // 2} * 2**20, np.uint8)
    return int(b[0])
"""


def test_memory_taken_while_the_code_loads_is_counted():
    # The grader's point of reference is taken before the module loads: a module that takes memory
    # first and gives it back in the function cannot make its function's peak look like nothing.
    peak, value = _peak(_BEFORE, _strict())
    assert value == 1 and peak >= COUNTED


_NAMED = f"""
import ctypes
import numpy as np

def f():
    ctypes.CDLL(None).prctl(15, b"x\\nVmHWM:\\t1 kB\\n", 0, 0, 0)   # PR_SET_NAME
    a = np.ones({BIG} * 2**20, np.uint8)
    return open("/proc/self/comm").read().count("VmHWM")
"""


def test_a_process_name_cannot_pose_as_a_status_line():
    peak, value = _peak(_NAMED, _strict())
    assert value == 1 and peak >= COUNTED  # the name was set; the kernel escapes it in status


_GIVE_BACK = f"""
import ctypes
import mmap

def f():
    buf = mmap.mmap(-1, {BIG} * 2**20)
    buf.write(b"x" * ({BIG} * 2**20))
    libc = ctypes.CDLL(None, use_errno=True)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    result = libc.madvise(ctypes.c_void_p(address), ctypes.c_size_t({BIG} * 2**20), ADVICE)
    return "refused" if result != 0 and ctypes.get_errno() == 1 else "given back"
"""


@pytest.mark.parametrize("advice", [4, 8, 9, 21], ids=["DONTNEED", "FREE", "REMOVE", "PAGEOUT"])
def test_giving_pages_back_is_refused(advice):
    """Pages given back (dropped, or paged out) let code allocate as much again unseen; given back
    before the baseline's pages (freed heap, library pages: the holdout's trick, a whole-state
    restore 103 MiB seen as 60 against an 81 MiB budget), they lower even a peak sampled from
    outside. Refused at the strict level, where the peak counts all of it; the contrast: allowed at
    the basic level (MADV_PAGEOUT takes nothing out without swap, but the kernel allows it)."""
    source = _GIVE_BACK.replace("ADVICE", str(advice))
    peak, value = _peak(source, _strict())
    assert value == "refused" and peak >= COUNTED
    _, value = _peak(source, sandbox.BASIC)
    assert value == "given back"


_WHOLE_THEN_RESET = """
import jax
import jax.numpy as jnp
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding


def restore_for_serving(ckpt_dir, mesh, specs):
    tree = ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree
    def leaf(path, m):
        spec = specs[path[-1].key] if len(m.shape) else jax.sharding.PartitionSpec()
        return jax.ShapeDtypeStruct(m.shape, jnp.bfloat16, sharding=NamedSharding(mesh, spec))
    state = ocp.StandardCheckpointer().restore(ckpt_dir, jax.tree_util.tree_map_with_path(leaf, tree))
    params = state["params"]
    del state
    try:
        with open("/proc/self/clear_refs", "w") as out:
            out.write("5")
    except OSError:
        pass
    return params
"""


@pytest.mark.parametrize("level", [sandbox.STRICT, sandbox.BASIC])
def test_a_whole_state_restore_that_hides_its_peak_scores_nothing(grade_code, level):
    if level == sandbox.STRICT:
        _strict()
    report = grade_code(_WHOLE_THEN_RESET, problems=["6.1"], learner="hides-its-peak", isolation=level)
    (result,) = report.problems
    # The peak is its anonymous memory sampled from outside, which clear_refs does not touch: the
    # reset (refused at strict, where Landlock keeps /proc/self read-only) gains nothing at either
    # level. (Before 6.1 was sampled so, it reset the kernel's VmHWM at basic: full marks.)
    assert result.status == "incorrect" and "over the budget" in result.message, result.message


def test_a_conversion_is_graded_on_its_checkpoint_whatever_it_returns(grade_code, root):
    # 6.2's statement says its return value is not looked at: one that cannot be sent back (a
    # module) costs nothing, and the checkpoint written is read back and judged as any other.
    reference = (root / "solutions" / "unit6.py").read_text()
    assert reference.rstrip().endswith("    ocp_v1.partial.finalize(out_dir)")
    source = reference.rstrip() + "\n    return jax  # a module: not plain data\n"
    report = grade_code(source, problems=["6.2"], learner="returns-a-module")
    (result,) = report.problems
    assert result.status == "correct", result.message


def test_the_grading_process_never_parses_a_checkpoint_a_learner_wrote(grade_code, root, monkeypatch):
    # 6.2's checkpoint is read back by a sandboxed worker of the grader's own: in the grading
    # process, Orbax's load is never called (here it would fail the grade).
    from orbax.checkpoint import v1 as ocp_v1

    def refuse(*args, **kwargs):
        raise AssertionError("the grading process parsed a learner's checkpoint")

    monkeypatch.setattr(ocp_v1, "load", refuse)
    monkeypatch.setattr(ocp_v1, "load_pytree", refuse)
    report = grade_code((root / "solutions" / "unit6.py").read_text(), problems=["6.2"], learner="read-back-check")
    (result,) = report.problems
    assert result.status == "correct", result.message


_MAPS = f"""
import mmap

import numpy as np

def f(path):
    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        view = np.frombuffer(mapped, np.uint8)
        touched = int(view[::4096].sum())  # every page of the file resident in this process
        held = np.ones({BIG // 2} * 2**20, np.uint8)  # its own memory
        out = touched + int(held[::4096].sum())
        del view, held
        mapped.close()
    return out
"""


def test_anonymous_memory_is_counted_and_the_pages_of_a_mapped_file_are_not(tmp_path):
    """6.2's measure: a reader that maps its input (safetensors' safe_open does) holds the file's
    pages resident, and the kernel's peak (VmHWM) counts them; they are the page cache's, not the
    process's allocation, and the anonymous peak leaves them out. Control: the peak resident set did
    grow by the whole file, so the pages really were mapped and touched."""
    level = _strict()
    workdir = sandbox.new_workdir(on_disk=True)
    try:
        path = f"{workdir}/input.bin"
        with open(path, "wb") as out:
            out.write(np.random.default_rng(0).integers(0, 255, BIG * MiB, dtype=np.uint8).tobytes())
        run = sandbox.Worker(_MAPS, "f", [(path,)], level=level, measure_memory=True, timeout=60, workdir=workdir).wait()
        assert run.status == "ok" and not run.setup, (run.status, run.setup, run.stderr_tail)
        (case,) = run.cases
        assert case["peak_bytes"] >= 0.95 * (BIG + BIG // 2) * MiB, case  # the file's pages and its own
        assert 0.95 * BIG // 2 * MiB <= case["anonymous_peak_bytes"] < (BIG // 2 + 20) * MiB, case
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


def test_a_memory_measured_workers_inputs_are_not_on_a_tmpfs(monkeypatch):
    """Where the temporary folder is a tmpfs (Debian 13's /tmp), a mapped input's pages would be
    shared memory, counted as the reader's own: a memory-measured worker's folder goes to disk, and
    Lesson 6's inputs too (the same choice)."""
    import shutil
    import tempfile

    from ckptlab.memory import measured_tempdir, on_tmpfs

    if not on_tmpfs("/dev/shm") or on_tmpfs("/var/tmp"):
        pytest.skip("needs a tmpfs at /dev/shm and a disk at /var/tmp")
    monkeypatch.setattr(tempfile, "tempdir", "/dev/shm")
    made = [sandbox.new_workdir(), sandbox.new_workdir(on_disk=True), measured_tempdir("unit6-")]
    try:
        assert [on_tmpfs(d) for d in made] == [True, False, False], made
    finally:
        for folder in made:
            shutil.rmtree(folder)


def test_a_tmpfs_the_process_fills_is_counted_with_its_memory(tmp_path):
    """Pages written into a tmpfs are in no process's RssAnon or RssShmem, yet they are memory (the
    container's): the sampler given the process's tmpfs adds what it holds (the grader's, given the
    worker's scratch, says a worker that filled its scratch was the one holding the container's memory;
    a hostile holdout's 500 MiB there read as the machine's). The control: the same sampler without the
    folder sees none of it. /dev/shm stands for the scratch tmpfs here."""
    import os
    import shutil
    import subprocess
    import tempfile

    from ckptlab.memory import AnonymousPeak

    if not os.path.isdir("/dev/shm") or os.statvfs("/dev/shm").f_bavail * os.statvfs("/dev/shm").f_frsize < 2**28:
        pytest.skip("no tmpfs at /dev/shm with 256 MiB free")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    folder = tempfile.mkdtemp(dir="/dev/shm", prefix="ckpt-test-")
    try:
        counted = AnonymousPeak(child.pid, interval=0.01, folder=folder)
        unseen = AnonymousPeak(child.pid, interval=0.01)
        with open(os.path.join(folder, "filled"), "wb") as f:
            f.write(b"\1" * (64 * 2**20))
        counted.sample()
        unseen.sample()
        assert counted.stop() >= 64 * 2**20 > 8 * 2**20 > unseen.stop()
    finally:
        child.kill()
        child.wait()
        shutil.rmtree(folder, ignore_errors=True)
