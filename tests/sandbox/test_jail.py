"""The jail's own guarantees, checked on the kernel itself: what it writes while it is built, and
the process limit that binds whatever the grader's user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from autograder import registry, sandbox
from autograder.sandbox import cgroups

pytestmark = pytest.mark.skipif(bool(sandbox.strict_missing()), reason="this machine cannot give the strict level")

# Builds a strict jail in a fresh process with every open for writing recorded, then prints the
# record from inside the jail (pid 2 of its namespace, under its init).
_ENTER_AND_RECORD = textwrap.dedent("""
    import builtins, json, os, sys
    from autograder.sandbox import jail

    written = []
    real_os_open, real_open = os.open, builtins.open

    def os_open(path, flags, *args, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
            written.append(os.fsdecode(path))
        return real_os_open(path, flags, *args, **kw)

    def open_(file, mode="r", *args, **kw):
        if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"):
            written.append(os.fsdecode(file))
        return real_open(file, mode, *args, **kw)

    confinement = jail.confinement_for(jail.STRICT, sys.argv[2], memory_bytes=0, file_bytes=0, count_reads=False,
                         cgroups=json.loads(sys.argv[1]))
    os.open, builtins.open = os_open, open_
    jail.enter(confinement)
    print(json.dumps({"pid": os.getpid(), "written": written}), flush=True)
""")


def test_building_the_jail_never_writes_a_machine_wide_setting(root, tmp_path):
    """Nothing under /proc/sys is written while a strict jail is built (as root too). On Linux
    6.12-6.13 kernel.pid_max is the machine's: a root grader's jail once set it to 400 for every
    user of the machine."""
    made = cgroups.worker_cgroups()  # as root, the worker's cgroups are joined (writes it may make)
    try:
        done = subprocess.run([sys.executable, "-c", _ENTER_AND_RECORD, json.dumps(made), str(tmp_path)], cwd=root,
                              capture_output=True, text=True, timeout=60)
    finally:
        for cgroup in made:
            cgroups.remove_cgroup(cgroup)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["pid"] == 2  # inside its own pid namespace, under its init: the jail was really built
    assert not [p for p in record["written"] if p.startswith("/proc/sys")], record["written"]
    assert set(record["written"]) <= {"/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map",
                                      "/proc/self/oom_score_adj"} | {f"{c}/cgroup.procs" for c in made}, record["written"]


_FORK_UNTIL_REFUSED = """
import os, time
def probe():
    n = 0
    try:
        for _ in range(3000):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            n += 1
    except OSError as exc:
        return [n, exc.errno]
    return [n, 0]
"""


def test_the_process_limit_binds_without_a_cgroup_whatever_the_graders_user(monkeypatch):
    """RLIMIT_NPROC, counted in the worker's own user namespace, stops a fork loop at about 400
    processes even where no pids cgroup can be made: a root grader's worker takes a real uid the
    kernel applies the limit to (it never applies it to the machine's root)."""
    import errno

    from autograder.sandbox import jail

    monkeypatch.setattr(cgroups, "worker_cgroups", lambda *a: [])
    run = sandbox.Worker(_FORK_UNTIL_REFUSED, "probe", [()], timeout=60, level=sandbox.STRICT, bare=True).wait()
    assert run.status == "ok", run.stderr_tail
    forked, err = run.cases[0]["value"]
    assert err == errno.EAGAIN and forked < jail.MAX_TASKS, (forked, err)


_HOLD_MEMORY = """
import os, time
GIB = 2**30

def probe():
    held = 0
    try:  # memfds: pages in no process's address space, outside RLIMIT_AS
        fds = []
        for _ in range(12):
            fd = os.memfd_create("x")
            os.ftruncate(fd, 255 * 2**20)
            os.pwrite(fd, b"x" * (255 * 2**20), 0)
            fds.append(fd)
            held += 255 * 2**20
    except OSError:
        pass
    ready, pids = [], []
    for _ in range(6):  # children of 1 GiB each: every one under its own address-space limit
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            block = bytearray(GIB)
            for i in range(0, GIB, 4096):
                block[i] = 1
            os.write(w, b"1")
            time.sleep(60)
            os._exit(0)
        os.close(w)
        os.set_blocking(r, False)
        ready.append(r)
        pids.append(pid)
    end = time.time() + 30
    while time.time() < end and ready:
        for r in list(ready):
            try:
                os.read(r, 1)
            except BlockingIOError:
                continue
            ready.remove(r)
        time.sleep(0.05)
    time.sleep(1)
    # Those still alive hold their GiB (a child the memory cgroup's OOM killer took is a zombie).
    alive = sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in pids)
    return held + alive * GIB
"""


def test_a_workers_tree_holds_no_more_memory_than_its_limit_however_it_spreads_it():
    """memfds (refused) and children each under the address-space limit: the whole tree holds at
    most the worker's memory limit (a memory cgroup's, which counts every page of the tree). Before:
    12 memfds and 6 children held 9 GiB; 40 memfds got the grader itself OOM-killed."""
    import os

    from autograder.sandbox import jail

    if os.geteuid() != 0:
        pytest.skip("a memory cgroup for each worker needs a root grader (or a delegated cgroup)")
    run = sandbox.Worker(_HOLD_MEMORY, "probe", [()], timeout=90, level=sandbox.STRICT, bare=True).wait()
    limit = sandbox.DEFAULT_MEMORY + jail.SCRATCH_BYTES
    if run.status == "ok":
        held = run.cases[0]["value"]
        assert held <= limit, f"the tree held {held / 2**30:.1f} GiB, over its {limit / 2**30:.1f} GiB"
    else:  # the memory cgroup's OOM killer took the worker itself: its tree held no more either
        assert run.status == "crashed", (run.status, run.stderr_tail[-500:])


_FILL_SCRATCH = """
import os
def probe():
    written, files = 0, 0
    try:
        while written < 2 * 2**30 and files < 100_000:
            with open(f"f{files}", "wb") as f:
                f.write(b"x" * (2**20 if written < 2**30 else 1))
            written += 2**20 if written < 2**30 else 1
            files += 1
    except OSError as exc:
        return [written, files, exc.errno]
    return [written, files, 0]
"""


def test_a_worker_fills_only_its_own_scratch():
    """Writing until the disk says no stops at the worker's own scratch size, or its number of
    files: nothing is taken from the machine's disk or from a classmate's scratch folder. Before:
    a worker filled the /tmp its classmates' scratch folders share."""
    import errno

    from autograder.sandbox import jail

    run = sandbox.Worker(_FILL_SCRATCH, "probe", [()], timeout=120, level=sandbox.STRICT, bare=True).wait()
    assert run.status == "ok", run.stderr_tail[-500:]
    written, files, err = run.cases[0]["value"]
    assert err == errno.ENOSPC and written <= jail.SCRATCH_BYTES and files <= jail.SCRATCH_INODES, (written, files)


_SHARE = """
import time

def probe():
    time.sleep(3)  # the hog's processes are started
    wall, cpu = time.perf_counter(), time.process_time()
    while time.perf_counter() - wall < 2:
        pass
    return (time.process_time() - cpu) / (time.perf_counter() - wall)
"""


def _share_beside_a_hog() -> None:
    """A worker measures the share of a core it gets beside one whose code runs 300 busy processes,
    each trying a session of its own: more than a quarter of a core."""
    from tests.hostile import cpu_hog

    hog = sandbox.Worker(cpu_hog("probe()"), "probe", [()], timeout=15, level=sandbox.STRICT, bare=True)
    try:
        run = sandbox.Worker(_SHARE, "probe", [()], timeout=30, level=sandbox.STRICT, bare=True).wait()
    finally:
        hog.kill()
    assert run.status == "ok", run.stderr_tail[-500:]
    share = run.cases[0]["value"]
    assert share > 0.25, f"the worker got {share:.3f} of a core beside the hog"


def test_a_worker_gets_its_share_of_the_cpu_beside_one_running_hundreds_of_processes():
    """A worker whose code runs 300 busy processes in sessions of their own takes one share of
    the CPU, not 300: a classmate's worker beside it still gets most of a core (each worker's
    tree is one cgroup). Before: about 1/150 of a core, and an honest classmate took 10 times as
    long (23.5 s for Unit 4, 1 s alone); four learners lost problems to timeouts."""
    import os

    if os.geteuid() != 0:
        pytest.skip("an equal CPU share for each worker needs a root grader's cgroups")
    _share_beside_a_hog()


def test_without_cgroups_a_worker_still_gets_its_share_beside_one_running_hundreds_of_sessions(monkeypatch):
    """A grader that cannot make cgroups (a normal user; emulated here by making none): the
    scheduler shares the CPU by session (autogroup), and a worker's code may not start a session of
    its own (seccomp refuses setsid), so a tree of 300 busy processes is one share, not 300: the
    classmate beside it still gets a good part of a core. Before: the hog's processes each took a
    session, the classmate about 1/150 of a core, and an honest 5.3 run was killed (issue 35)."""
    if open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() != "1":
        pytest.skip("the kernel's autogroups are off here: sessions are not what the scheduler shares by")
    monkeypatch.setattr(cgroups, "worker_cgroups", lambda *args, **kwargs: [])
    _share_beside_a_hog()


_SLEEPER = """
import time

def probe():
    time.sleep(3)  # no CPU time: slow on the clock only, as on a machine busy with other work
    return 1
"""


def test_a_worker_slow_on_the_clock_is_not_cut_short_before_the_clock_cap(monkeypatch):
    """wait() gives up on a worker only past the clock cap (twice the limit), never at the limit
    plus a margin: a worker within its CPU time on a busy machine keeps its answer. Emulated with a
    short margin (0.5 s) and limit (2 s): the worker answers after 3 s, before the 4 s cap. Before:
    killed at 2.5 s (and with the real margin, a 60 s problem's worker at 90 s, before its 120 s cap)."""
    monkeypatch.setattr("autograder.sandbox.worker.JOIN_MARGIN", 0.5)
    run = sandbox.Worker(_SLEEPER, "probe", [()], timeout=2, level=sandbox.BASIC).wait()
    assert run.status == "ok" and run.cases[0]["value"] == 1, (run.status, run.stderr_tail[-500:])


_LANDLOCK_REFUSED = textwrap.dedent("""
    import errno
    from autograder.sandbox import landlock, seccomp, syscalls

    syscalls.check(syscalls.libc().prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    seccomp.install(seccomp.program({"landlock_create_ruleset": errno.EPERM}, guard_pdeathsig=False,
                                    forbid_file_maps=False), syscalls.libc())
    print(landlock.landlock_status())
""")


def test_the_isolation_check_names_a_seccomp_profile_that_refuses_landlock(root):
    """A container's seccomp profile refusing Landlock's calls (emulated: a real filter answering
    EPERM, as Docker's does) is named as such, not blamed on the kernel's lsm= list."""
    done = subprocess.run([sys.executable, "-c", _LANDLOCK_REFUSED], cwd=root, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(0, " in done.stdout and "seccomp" in done.stdout and "lsm=" not in done.stdout, done.stdout


def test_the_isolation_check_says_each_guarantee_and_its_mechanism(root):
    done = subprocess.run([sys.executable, "-m", "autograder", "isolation"], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for guarantee in ("reads only", "writes only its own scratch", "no network", "cannot signal",
                      "ends with the problem", "memory of its whole tree", "share of the CPU", "counts every byte",
                      "machine-wide"):
        assert guarantee in done.stdout
    assert done.stdout.count("by: ") == 11


_WORK = """
import time

def probe():
    start = time.process_time()
    while time.process_time() - start < 1.5:  # 1.5 s of CPU time
        pass
    return 1
"""

_BUSY = "import os, time\nos.setsid()\nend = time.time() + 40\nwhile time.time() < end:\n    pass\n"


def test_a_timeout_is_the_workers_own_cpu_time_not_a_busy_machines_clock(monkeypatch):
    """A worker needing 1.5 s of CPU time, under a 6 s limit, on a core that 4 other processes
    (each in a session of its own, outside any worker) keep busy: it finishes, since the limit
    counts its own CPU time, with more than the limit on the clock beside it. Judged by the clock
    alone it had about 1/5 of a core: about 7.5 s, a timeout (1 s under a 5 s limit timed out at
    5.1 s before). Where no cgroup can be made (a grader running as a normal user), this is what
    keeps a busy machine from costing a learner.

    The busy processes and the worker's tree share one core (their affinity), so the worker's share
    is about 1/5 whatever else the machine runs: its other work goes to the other cores. Spread over
    every core, the share was the whole machine's load's to decide, and a loaded run went past the
    clock cap (13 s, twice the limit) where a quiet one was under the limit (a test of nothing)."""
    import subprocess
    import sys
    import time

    from autograder.sandbox import proctree

    monkeypatch.setattr(cgroups, "worker_cgroups", lambda *a: [])
    core = {min(os.sched_getaffinity(0))}
    busy = [subprocess.Popen([sys.executable, "-c", _BUSY], preexec_fn=lambda: os.sched_setaffinity(0, core))
            for _ in range(4)]
    try:
        worker = sandbox.Worker(_WORK, "probe", [()], timeout=6, level=sandbox.STRICT, bare=True)
        pinned: set[int] = set()
        for _ in range(20):  # the worker and whatever it forks, as they appear (a fork inherits it)
            for pid in {worker.proc.pid, *proctree.children(worker.proc.pid),
                        *(g for c in proctree.children(worker.proc.pid) for g in proctree.children(c))} - pinned:
                try:
                    os.sched_setaffinity(pid, core)
                    pinned.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)
        run = worker.wait()
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert pinned, "no process of the worker's could be pinned to the busy core"
    assert run.status == "ok" and run.cases[0]["value"] == 1, (run.status, run.seconds)
    assert run.seconds > 6, f"the core was not busy enough to tell ({run.seconds:.1f} s on the clock)"


def test_a_worker_that_waits_forever_ends_at_the_wall_clock_cap():
    run = sandbox.Worker("import time\ndef probe():\n    time.sleep(600)\n", "probe", [()], timeout=1,
                         level=sandbox.STRICT, bare=True).wait()
    assert run.status == "timeout" and 2 <= run.seconds < 6, (run.status, run.seconds)


@pytest.mark.skipif(not sandbox.strict_namespaces(), reason="strict workers get no pid namespace of their own here")
def test_a_preempted_worker_is_reaped_by_its_own_launcher():
    """A preemption kills pid 1 of the worker's pid namespace, and with it every process inside; the
    launcher (the grader's code, outside the namespace) reaps it and exits by itself, with its
    child's status (128 + SIGKILL). Killed with it, the launcher would leave pid 1 to whichever
    process adopts orphans on the machine, and the grader waits until the namespace is empty."""
    import time

    worker = sandbox.Worker("import time\ndef probe():\n    time.sleep(600)\n", "probe", [()], timeout=30,
                            level=sandbox.STRICT, bare=True)
    deadline = time.monotonic() + 20
    while not worker.namespace and time.monotonic() < deadline:  # (set once the module has loaded)
        time.sleep(0.01)
    assert worker.namespace, "the worker never started"
    worker.preempt()
    run = worker.wait()
    assert run.status in ("crashed", "ok") and worker.proc.returncode == 128 + 9, (run.status, worker.proc.returncode)
    assert not sandbox.namespace_pids(worker.namespace)


@pytest.mark.parametrize("abi", ["1", "2"])
def test_before_landlock_abi_3_seccomp_refuses_truncate(tmp_path, monkeypatch, abi):
    import errno

    """Emulating a Linux 5.15 or 6.1 kernel (Landlock ABI 1 or 2, which cannot govern truncate(2)):
    a worker's code truncating a file it may only read is refused, and the file keeps its bytes."""
    monkeypatch.setenv("CKPT_TEST_LANDLOCK_ABI", abi)
    victim = tmp_path / "case.safetensors"
    victim.write_bytes(b"x" * 1000)
    code = ("import os\ndef probe():\n    try:\n        os.truncate('../case.safetensors', 0)\n        err = 0\n"
            "    except OSError as exc:\n        err = exc.errno\n    return [err, os.path.getsize('../case.safetensors')]\n")
    run = sandbox.Worker(code, "probe", [()], timeout=30, level=sandbox.STRICT, bare=True, workdir=str(tmp_path)).wait()
    assert run.status == "ok", run.stderr_tail[-500:]
    err, size = run.cases[0]["value"]
    assert err == errno.EPERM and size == 1000, (err, size)


# A grader on a platform that refuses new namespaces (Docker's default seccomp profile, Ubuntu
# 24.04's AppArmor rule), emulated: a real seccomp filter on the grader refuses unshare with EPERM.
def _on(platform: str, *args: str, user: bool = False) -> list[str]:
    """A command run under an emulated platform (tests/platforms.py)."""
    from tests import platforms

    python = sys.executable
    return [sys.executable, str(platforms.ROOT / "tests" / "platforms.py"), platform,
            *(["--user", str(platforms.USER)] if user else []), "--", python, *args]


def test_where_namespaces_are_refused_the_level_is_strict_without_them_and_says_so(root, tmp_path):
    """Docker's defaults (emulated: its capabilities, read-only cgroups, a seccomp filter refusing
    unshare): the check names strict without namespaces, why they are refused and how to allow
    them, and each guarantee's mechanism; grade-batch grades at strict. Before: basic, and
    grade-batch refused to grade."""
    check = subprocess.run(_on("docker-default", "-m", "autograder", "isolation"), cwd=root, capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and "Level available: strict" in check.stdout, check.stdout + check.stderr
    assert "no namespaces (refused here)" in check.stdout and "unshare" in check.stdout
    assert "--security-opt seccomp=" in check.stdout  # how to allow them
    assert "seccomp refuses fork and clone without CLONE_THREAD" in check.stdout
    assert "the grader measures the folder" in check.stdout
    (tmp_path / "subs").mkdir()
    shutil.copy(root / "solutions" / "unit4.py", tmp_path / "subs" / "ann.py")
    batch = subprocess.run(_on("docker-default", "-m", "autograder", "grade-batch", str(tmp_path / "subs"), "--out",
                               str(tmp_path / "out"), "--quiet"), cwd=root, capture_output=True, text=True, timeout=300)
    assert batch.returncode == 0 and "Isolation: strict" in batch.stdout, batch.stdout + batch.stderr
    report = json.loads((tmp_path / "out" / "learners" / "ann.json").read_text())
    assert report["score"] == sum(p.points for p in registry.PROBLEMS if p.unit == 4), [(p["id"], p["message"]) for p in report["problems"] if p["score"] == 0]


# The strict level without namespaces, on this machine: the same jail, chosen directly.
_NO_PROCESSES = """
import os, threading

def probe():
    try:
        os.fork()
        forked = True
    except OSError as exc:
        forked = exc.errno
    stop, started = threading.Event(), 0
    while started < 5000:
        try:
            threading.Thread(target=stop.wait, daemon=True).start()
        except RuntimeError:
            break
        started += 1
    stop.set()
    return [forked, started]
"""


def test_without_namespaces_a_worker_starts_no_process_and_a_bounded_number_of_threads():
    """No pid namespace to end its processes with it: a worker may start none (so none outlives
    it), and its threads stop at the process limit, under a uid of its own for a root grader."""
    import errno

    from autograder.sandbox import jail

    run = sandbox.Worker(_NO_PROCESSES, "probe", [()], timeout=60, level=sandbox.STRICT, bare=True,
                         namespaces=False).wait()
    assert run.status == "ok", run.stderr_tail[-500:]
    forked, started = run.cases[0]["value"]
    assert forked == errno.EPERM and 10 < started < jail.MAX_TASKS, (forked, started)


_SIGNALS = """
import os, signal

def probe():
    out = []
    for pid in (os.getppid(), 1, -1):
        try:
            os.kill(pid, 0)
            out.append(True)
        except OSError as exc:
            out.append(exc.errno)
    os.kill(os.getpid(), 0)  # itself: allowed
    return out
"""


@pytest.mark.parametrize("abi", ["", "4"])
def test_without_namespaces_a_worker_signals_no_other_process(monkeypatch, abi):
    """Not its parent (the zygote), not init, not every process it may signal (kill -1): Landlock's
    signal scope does it from ABI 6, seccomp below. Before seccomp's rule, kill_everything (ABI 4,
    a root grader) killed every root process of the machine, the test runner's shell included."""
    import errno

    if abi:
        monkeypatch.setenv("CKPT_TEST_LANDLOCK_ABI", abi)
    run = sandbox.Worker(_SIGNALS, "probe", [()], timeout=60, level=sandbox.STRICT, bare=True,
                         namespaces=False).wait()
    assert run.status == "ok", run.stderr_tail[-500:]
    assert run.cases[0]["value"] == [errno.EPERM] * 3


def test_without_namespaces_a_worker_that_fills_its_scratch_is_stopped():
    """No tmpfs of its own: the grader measures the scratch folder from outside and stops the worker
    past 512 MiB or 20,000 files; the folder is removed with the worker."""
    run = sandbox.Worker(_FILL_SCRATCH, "probe", [()], timeout=120, level=sandbox.STRICT, bare=True,
                         namespaces=False)
    scratch = run.scratch
    result = run.wait()
    assert result.status == "scratch_full", (result.status, result.cases)
    assert not os.path.exists(scratch)


_HOLDER = """
import os, sys, time
os.setresuid(int(sys.argv[1]), 0, 0)  # as a root grader's worker without namespaces, not read-counted
print("ready", flush=True)
time.sleep(60)
"""


def test_a_read_count_the_grader_cannot_read_is_unknown_never_zero(root):
    """Where the grader may not read a process's count (another real uid, and no CAP_SYS_PTRACE:
    Docker's defaults), the tree's count is None, which fails the read check; never 0, which
    would pass any read."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run a process under another uid")
    script = (
        "import subprocess, sys\n"
        "from autograder import sandbox\n"
        f"p = subprocess.Popen([sys.executable, '-c', {_HOLDER!r}, '4243'], stdout=subprocess.PIPE, text=True)\n"
        "p.stdout.readline()\n"
        "unknown = sandbox.tree_rchar(p.pid)\n"
        "p.kill(); p.wait()\n"
        "print(unknown, sandbox.tree_rchar(__import__('os').getpid()) is not None)\n")
    out = subprocess.run(_on("docker-default", "-c", script), cwd=root, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["None", "True"], out.stdout + out.stderr


_TWO_CORES = """
import os, time

def probe():
    pid = os.fork()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:  # both processes busy for 1.5 s: 3 s of CPU time
        pass
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return 1
"""


def test_a_worker_busy_on_two_cores_is_not_cut_short_before_its_limit_on_the_clock():
    """A timeout needs the limit passed on the clock too: 3 s of CPU time in 1.5 s on two cores,
    under a 2 s limit, finishes (a limit on CPU time alone ended it after 1 s)."""
    run = sandbox.Worker(_TWO_CORES, "probe", [()], timeout=2, level=sandbox.STRICT, bare=True).wait()
    assert run.status == "ok" and run.cases[0]["value"] == 1, (run.status, run.seconds)


def test_cgroups_a_killed_grader_left_are_removed_by_the_next_one_but_never_a_live_workers(monkeypatch):
    """A grader killed outright leaves its workers' empty cgroups; the next grader removes those
    older than ten minutes, never one that holds a process. Before: they piled up (51 here)."""
    if os.geteuid() != 0 or not os.path.isdir(os.path.join(cgroups.CGROUP_ROOT, "pids")):
        pytest.skip("needs a root grader on cgroup v1")
    stale = os.path.join(cgroups.CGROUP_ROOT, "pids", "ckpt-worker-stale-test")
    busy = os.path.join(cgroups.CGROUP_ROOT, "pids", "ckpt-worker-busy-test")
    os.makedirs(stale, exist_ok=True)
    os.makedirs(busy, exist_ok=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with open(os.path.join(busy, "cgroup.procs"), "w") as f:
            f.write(str(sleeper.pid))
        monkeypatch.setattr(cgroups, "STALE_CGROUP_SECONDS", 3600)
        cgroups.sweep_stale_cgroups.__wrapped__()
        assert os.path.isdir(stale)  # young: may be a live grader's, about to be joined
        monkeypatch.setattr(cgroups, "STALE_CGROUP_SECONDS", -1)
        assert cgroups.sweep_stale_cgroups.__wrapped__() >= 1
        assert not os.path.exists(stale) and os.path.isdir(busy)
    finally:
        sleeper.kill()
        sleeper.wait()
        for path in (stale, busy):
            cgroups.remove_cgroup(path)


_MEASURE_WITH_FEW_DESCRIPTORS = """
import resource, sys
from autograder import registry, sandbox
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
print(sandbox.scratch_over(sys.argv[1], int(sys.argv[2]), 10**6))
"""


def test_a_scratch_folder_spread_over_many_folders_or_nested_deep_is_measured_all_the_same(tmp_path, root):
    """A worker's bytes spread over 1,000 folders, measured by a grader with 64 descriptors, and
    folders nested 100 deep: both over. Before, the walk held a descriptor for every folder still to
    visit: past the grader's limit the rest went unopened and uncounted (the bytes hid from it), and
    the grader's other work was left without descriptors."""
    spread = tmp_path / "spread"
    for i in range(1000):
        (spread / f"d{i}").mkdir(parents=True)
        (spread / f"d{i}" / "f").write_bytes(b"x" * 8192)
    run = lambda top, limit: subprocess.run([sys.executable, "-c", _MEASURE_WITH_FEW_DESCRIPTORS, str(top), str(limit)],  # noqa: E731
                                            cwd=root, capture_output=True, text=True, timeout=60)
    assert run(spread, 2**20).stdout.strip() == "True", run(spread, 2**20).stderr[-500:]  # 8 MiB in all
    assert run(spread, 64 * 2**20).stdout.strip() == "False"
    deep = tmp_path / "deep"
    os.makedirs(deep / os.path.join(*["d"] * 100))
    assert sandbox.scratch_over(str(deep), 2**30, 10**6)


_FORKED_CHILD = """
import os
import time

def probe(n):
    if os.fork() == 0:
        return "child"  # a copy of the worker, back in the worker's loop
    time.sleep(0.3)
    return "parent"
"""


def test_a_process_the_learners_code_forks_never_answers_for_the_worker():
    """A child forked by learner code that returns from the function is a copy of the worker,
    holding its channel: it exits silently instead of answering (and reading the next case). Before:
    its answer came first ("child"), and the two processes shared the next frames."""
    from tests.conftest import best_isolation

    run = sandbox.Worker(_FORKED_CHILD, "probe", [(1,), (2,)], timeout=30, level=best_isolation()).wait()
    assert run.status == "ok" and [c.get("value") for c in run.cases] == ["parent", "parent"], (run.status, run.cases)


@pytest.mark.parametrize("late", ["preempt", "kill", "zygote_reaped"])
def test_a_late_kill_never_reaches_a_process_that_took_the_reaped_workers_pid(late):
    """Pids come round again fast (32,768 on many machines, one per thread), and a preemption is
    timed from outside: it can come after the worker ended and was reaped. A process that has
    since taken the worker's pid, in a session of its own as every worker's launcher is (another
    learner's worker, say), must not be killed. The pid's reuse is staged: the reaped worker's
    record is pointed at such a process. ``zygote_reaped``: a worker the zygote forked is reaped by
    the zygote the moment it ends, before this grader has waited for it (the window a 5.3
    preemption watcher runs in)."""
    worker = sandbox.Worker("def probe():\n    return 1\n", "probe", [()], timeout=5, level=sandbox.STRICT, bare=True)
    run = worker.wait()
    assert run.status == "ok" and worker.proc.returncode is not None
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        worker.proc.pid = other.pid  # as if the number had come round to it
        if late == "zygote_reaped":
            if not hasattr(worker.proc, "zygote"):
                pytest.skip("no zygote on this machine: workers are the grader's own children")
            worker.proc.returncode = None  # not waited for here yet; the zygote has reaped it and said so
            with worker.proc.zygote.changed:
                worker.proc.zygote.exited[other.pid] = 0
            late = "preempt"
        getattr(worker, late)()
        with pytest.raises(subprocess.TimeoutExpired):
            other.wait(timeout=0.5)  # still running
    finally:
        other.kill()
        other.wait()


# A learner's worker looks for the programs JAX compiled for others: the grader's trusted workers'
# (the course's training step, 5.3's planted run) and a classmate's 5.3 series.
_COMPILED_ELSEWHERE = """
import glob, os

def probe(paths):
    got = {"read": [], "written": []}
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.read(1)
            got["read"].append(path)
        except OSError:
            pass
        try:
            with open(path, "ab") as f:
                f.write(b"poison")
            got["written"].append(path)
        except OSError:
            pass
    return got
"""


@pytest.mark.parametrize("level", [sandbox.STRICT, sandbox.BASIC])
def test_a_worker_reaches_no_compiled_programs_but_its_own_series(level):
    """The programs JAX keeps for a series of workers (a 5.3 case's runs) and for the grader's
    trusted workers (their compile cache, kept for the grader's life) are out of any other worker's
    reach at the strict level: neither read (a planted run's program holds its seed) nor poisoned
    (a rewritten program would run in the grader's trusted worker). The control: at the basic level,
    which has no jail, the same worker reads and rewrites both."""
    from autograder.sandbox import trusted, worker

    cache = os.path.join(trusted._folder(), "scratch", worker.COMPILE_CACHE)
    os.makedirs(cache, exist_ok=True)
    series = sandbox.new_workdir()
    try:
        os.makedirs(os.path.join(series, "scratch", worker.COMPILE_CACHE))
        targets = [os.path.join(cache, "probe-entry-cache"), os.path.join(series, "scratch", worker.COMPILE_CACHE, "e-cache")]
        for path in targets:
            with open(path, "wb") as f:
                f.write(b"compiled")
        run = sandbox.Worker(_COMPILED_ELSEWHERE, "probe", [(targets,)], timeout=60, level=level).wait()
        assert run.status == "ok", run.stderr_tail[-500:]
        got = run.cases[0]["value"]
        if level == sandbox.STRICT:
            assert got == {"read": [], "written": []}, got
        else:
            assert got == {"read": targets, "written": targets}, got
        for path in targets:
            with open(path, "rb") as f:
                assert f.read() == (b"compiled" if level == sandbox.STRICT else b"compiledpoison")
            os.unlink(path)
    finally:
        sandbox.remove_folder(series)


_COMPILES = """
import jax, jax.numpy as jnp

def probe():
    events = []
    jax.monitoring.register_event_listener(lambda event, **kw: events.append(event))
    jax.jit(lambda x: jnp.sin(x) * 3 + 1)(jnp.arange(7.0)).block_until_ready()
    return [e for e in events if "compilation_cache" in e]
"""


def test_the_workers_of_a_series_reuse_what_the_first_compiled():
    """A 5.3 case's workers share their scratch folder: the second finds the first's program there
    (a cache hit, as JAX counts it). The control: a worker without the series' cache compiles
    afresh."""
    from autograder.sandbox import worker

    series = sandbox.new_workdir()
    try:
        def run(cache: bool):
            out = sandbox.Worker(_COMPILES, "probe", [()], timeout=60, level=sandbox.STRICT,
                                 workdir=series, keep_scratch=True, compile_cache=cache).wait()
            assert out.status == "ok", out.stderr_tail[-500:]
            return out.cases[0]["value"]

        assert not any("cache_hits" in e for e in run(False))
        first, second = run(True), run(True)
        assert not any("cache_hits" in e for e in first) and any("cache_hits" in e for e in second), (first, second)
        assert os.listdir(os.path.join(series, "scratch", worker.COMPILE_CACHE))
    finally:
        sandbox.remove_folder(series)


# --- The learner's process is an ordinary one: a minimal init is pid 1 of its pid namespace -------
# Linux gives pid 1 of a pid namespace no signal it has no handler for: were the learner's process
# pid 1, a SIGTERM would do nothing to a loop without a handler, which on any machine ends at once.

_TERM = """
import os, signal, time

def wait_for_term(ready, seconds):
    HOW
    open(ready, "w").close()  # (its disposition is set: the grader may signal)
    time.sleep(seconds)
    return "ran on"
"""
_HOWS = {"no handler": "pass", "SIG_DFL set": "signal.signal(signal.SIGTERM, signal.SIG_DFL)",
         "a handler that goes on (control)":
             "signal.signal(signal.SIGTERM, lambda signum, frame: open(ready + '.got', 'w').close())"}
_LEVELS = {"strict": (sandbox.STRICT, None), "strict without namespaces": (sandbox.STRICT, False),
           "basic": (sandbox.BASIC, None)}


def _terminated(level: str, namespaces, how: str, tmp_path, window: float) -> tuple:
    """A function sent a SIGTERM by Worker.terminate once its disposition is set: (its result's
    status, its launcher's exit status, whether it still ran ``window`` seconds after the signal,
    whether a handler of its got the signal)."""
    import time

    ready = tmp_path / "scratch" / "ready"  # (the worker's own scratch folder: it may write there)
    worker = sandbox.Worker(_TERM.replace("HOW", _HOWS[how]), "wait_for_term", [(str(ready), 30.0)], timeout=60,
                            workdir=str(tmp_path), level=level, namespaces=namespaces, keep_scratch=True, bare=True)
    try:
        while not ready.exists() and worker.thread.is_alive():
            time.sleep(0.01)
        assert worker.thread.is_alive(), "the function never started"
        worker.terminate()
        worker.thread.join(window)
        ran_on = worker.thread.is_alive()
        if ran_on:
            worker.preempt()  # the grace window's SIGKILL
        run = worker.wait()
        got = (tmp_path / "scratch" / "ready.got").exists()
    finally:
        sandbox.remove_folder(str(tmp_path))
    return run.status, worker.proc.returncode, ran_on, got


@pytest.mark.parametrize("where", list(_LEVELS))
def test_a_loop_without_a_sigterm_handler_ends_on_the_sigterm_at_every_level(where, tmp_path):
    """Worker.terminate (8.3's preemption notice) reaches the learner's process with its default
    disposition intact: a function with no handler, or with SIG_DFL set, ends at once, killed by the
    SIGTERM itself, at the strict level (its process pid 2 under the namespace's init) as at basic and
    strict without namespaces. The control: the same function with a handler that notes the signal
    and goes on gets it, and runs on until the grace window's SIGKILL. Before: at strict the learner's
    process was pid 1 of its namespace, the kernel dropped the SIGTERM, and both ran on to the
    SIGKILL, as the control does."""
    level, namespaces = _LEVELS[where]
    if level == sandbox.STRICT and namespaces is None and not sandbox.strict_namespaces():
        pytest.skip("strict workers get no pid namespace of their own here")
    # The launcher of a namespace reports its init's exit code, 128 + the signal its worker died of.
    by = lambda signum: 128 + signum if level == sandbox.STRICT and namespaces is None else -signum  # noqa: E731
    ended = {how: _terminated(level, namespaces, how, tmp_path / str(i), window=3.0) for i, how in enumerate(_HOWS)}
    assert ended["no handler"] == ("crashed", by(15), False, False), ended
    assert ended["SIG_DFL set"] == ("crashed", by(15), False, False), ended
    assert ended["a handler that goes on (control)"] == ("crashed", by(9), True, True), ended


_namespaced = pytest.mark.skipif(not sandbox.strict_namespaces(),
                                           reason="strict workers get no pid namespace of their own here")
_PIDS = """
import os

def probe():
    with open("/proc/self/status") as f:  # its own /proc entry, which Landlock leaves it: its own pid there
        own = [line.split()[-1] for line in f if line.startswith("NSpid:")]
    return [os.getpid(), os.getppid(), own]
"""


@_namespaced
def test_the_learners_process_is_not_pid_1_of_its_namespace():
    """At the strict level the learner's function runs as pid 2, the child of the namespace's init
    (pid 1): an answer that does the right thing only `if os.getpid() == 1` finds nothing to test. It
    still reads its own /proc entry, as before: Landlock's rule for it is its own (the jail is built
    after the fork: a rule made before it names the init's entry, and the worker could not read its own)."""
    run = sandbox.Worker(_PIDS, "probe", [()], timeout=30, level=sandbox.STRICT, bare=True).wait()
    assert run.status == "ok", (run.status, run.cases, run.stderr_tail[-500:])
    assert run.cases[0]["value"] == [2, 1, ["2"]], run.cases


_ORPHANS = """
import os, time

def probe(n):
    orphans = []
    for _ in range(n):
        report_r, report_w = os.pipe()
        child = os.fork()
        if child == 0:  # a child that leaves a grandchild behind, which ends once it is an orphan
            hold_r, hold_w = os.pipe()
            grandchild = os.fork()
            if grandchild == 0:
                os.close(hold_w)
                os.read(hold_r, 1)  # until its parent has ended: then pid 1 of the namespace adopts it
                os._exit(0)
            os.write(report_w, str(grandchild).encode())
            os._exit(0)
        os.close(report_w)
        orphans.append(int(os.read(report_r, 32)))
        os.close(report_r)
        os.waitpid(child, 0)
    end = time.monotonic() + 5
    while orphans and time.monotonic() < end:  # a zombie stays until its parent reaps it
        time.sleep(0.01)
        orphans = [pid for pid in orphans if exists(pid)]
    return len(orphans)

def exists(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
"""


@_namespaced
def test_orphans_the_learners_code_leaves_are_reaped():
    """Every orphan is adopted by pid 1 of the namespace, which must reap it once it ends: three
    grandchildren, orphaned, then ended, are gone (the learner's process signals each by its pid)
    within 5 s. Before, the learner's process was pid 1 and reaped none: each stayed a zombie,
    counted against the worker's 400 processes until the worker ended."""
    run = sandbox.Worker(_ORPHANS, "probe", [(3,)], timeout=60, level=sandbox.STRICT, bare=True).wait()
    assert run.status == "ok", (run.status, run.stderr_tail[-500:])
    assert run.cases[0]["value"] == 0, f"{run.cases[0]['value']} of 3 orphans left as zombies"


_SIGNAL_THE_INIT = """
import os, signal, time

FORWARDED = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGWINCH]

def probe(case):
    got, refused = [], []
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, frame: got.append(int(signum)))
    for signum in [signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGCHLD,
                   signal.SIGPIPE, signal.SIGTSTP, signal.SIGCONT, signal.SIGXCPU, *FORWARDED]:
        try:
            os.kill(1, signum)
        except OSError as exc:
            refused.append(exc.errno)
    end = time.monotonic() + 10
    while not refused and len(set(got)) < len(FORWARDED) and time.monotonic() < end:
        time.sleep(0.01)
    time.sleep(0.2)
    return [case, os.getppid(), sorted(set(got)), refused]
"""


@_namespaced
@pytest.mark.parametrize("abi", ["", "4"])
def test_a_learner_who_signals_the_init_gains_nothing_and_breaks_nothing(monkeypatch, abi):
    """Learner code sends pid 1 of its namespace, the init, every kind of signal, twice over. Where
    Landlock scopes signals (ABI 6), every one is refused: the init is outside the worker's domain.
    Below it (ABI 4, emulated), SIGKILL and SIGSTOP, faults and stops, which the init has no handler
    for, the kernel drops (sent from inside the namespace), SIGCHLD finds nothing to reap, and the
    signals the init forwards come back to the learner's own process, as though it had sent them
    itself. Either way the init lives on: the second case is answered by the same worker, still its
    child, and nothing is left of the namespace after."""
    import errno
    import signal

    from autograder.sandbox import landlock

    if abi:
        monkeypatch.setenv("CKPT_TEST_LANDLOCK_ABI", abi)
    scoped = landlock.landlock_abi() >= 6 and not abi
    worker = sandbox.Worker(_SIGNAL_THE_INIT, "probe", [(1,), (2,)], timeout=60, level=sandbox.STRICT, bare=True)
    run = worker.wait()
    assert run.status == "ok", (run.status, run.stderr_tail[-500:])
    forwarded = sorted(int(s) for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1,
                                        signal.SIGUSR2, signal.SIGALRM, signal.SIGWINCH))
    # (18 signals sent: 10 kinds the init does not forward, 8 it does)
    each = [[], [errno.EPERM] * 18] if scoped else [forwarded, []]
    assert [c.get("value") for c in run.cases] == [[1, 1, *each], [2, 1, *each]], run.cases
    assert worker.namespace and not sandbox.namespace_pids(worker.namespace)


# Namespaces made one after another, each a user and a pid namespace held by processes of their own (until
# this helper ends), until one takes the number argv[1] or argv[2] are made: the numbers they took.
_NAMESPACES = """
import json, os, sys

want, tries = int(sys.argv[1]), int(sys.argv[2])
hold_r, hold_w = os.pipe()
taken = []
for _ in range(tries):
    made_r, made_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(hold_w)
        os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWPID)
        os.fork()  # (a pid namespace is named once it has its pid 1)
        os.close(made_w)
        os.read(hold_r, 1)  # (end of file once the helper has ended)
        os._exit(0)
    os.close(made_w)
    os.read(made_r, 1)  # (end of file once its namespaces are made)
    os.close(made_r)
    taken += [os.stat(f"/proc/{pid}/ns/{kind}").st_ino for kind in ("user", "pid_for_children")]
    if want in taken:
        break
print(json.dumps(taken))
"""


@_namespaced
def test_a_workers_namespace_keeps_its_name_until_the_grader_is_done_with_it(monkeypatch):
    """The grader's last look for a worker's processes (proctree.wait_gone, once its launcher is reaped)
    finds them by the name of their pid namespace and kills whatever it finds. The kernel gives an ended
    namespace's number to the next namespace made, at once: a worker started meanwhile (two problems
    graded in parallel, another grader on the machine) could bear the name, and be killed (seen: a worker
    that took an ended one's name, SIGKILLed by a late look for the ended one). So the grader holds the
    namespace open until its look is done: the namespaces made while it looks (up to 30 user and 30 pid
    namespaces, lowest numbers first) never take its number. Without the hold, one does."""
    from autograder.sandbox import proctree

    seen = {}
    look = proctree.wait_gone

    def late(namespace, seconds=5.0):  # the grader's look, once other namespaces were made
        number = int(namespace[len("pid:["):-1])
        made = subprocess.run([sys.executable, "-c", _NAMESPACES, str(number), "30"], capture_output=True,
                              text=True, timeout=60)
        seen.update(number=number, taken=json.loads(made.stdout or "[]"), stderr=made.stderr[-500:])
        look(namespace, seconds)

    monkeypatch.setattr(proctree, "wait_gone", late)
    run = sandbox.Worker("def probe():\n    return 1\n", "probe", [()], timeout=30, level=sandbox.STRICT,
                         bare=True).wait()
    assert run.status == "ok" and seen.get("taken"), (run.status, seen)
    assert seen["number"] not in seen["taken"], seen  # (all 60 made, none with its number)


# The init's start, outside any namespace: its jail (argv[2]: "fails" or "holds") takes argv[1] seconds.
_INIT_JAILED = """
import sys, time
from autograder.sandbox import pid1

def jail():
    time.sleep(float(sys.argv[1]))
    if sys.argv[2] == "fails":
        raise OSError("its jail refused")

pid1.start(jail=jail)
print("the worker went on", flush=True)  # (only the worker returns from start)
"""


@pytest.mark.parametrize("jail", ["fails", "holds"])
def test_a_worker_goes_on_only_once_its_init_is_jailed(root, jail):
    """The init jails itself beside the worker. Should its jail fail, the worker must end before it
    runs any learner code: a failed start, the grader's own failure. Had the worker gone on at once,
    an init whose jail failed late (refused by the kernel after a wait on a busy machine) would end it
    in the middle of the learner's function: a crash charged to the learner (seen, the init's jail
    made to fail 1 s late: status crashed, exit 70, for a right answer). The control: an init whose
    jail holds lets the worker go on, and exits with its status."""
    from autograder.sandbox import pid1

    done = subprocess.run([sys.executable, "-c", _INIT_JAILED, "0.3", jail], capture_output=True, text=True,
                          timeout=60, cwd=root)
    if jail == "fails":
        assert (done.stdout, done.returncode) == ("", pid1.FAILED) and "its jail refused" in done.stderr, done
    else:
        assert (done.stdout, done.returncode) == ("the worker went on\n", 0), done
