"""The jail's own guarantees, checked on the kernel itself: what it writes while it is built, and
the process limit that binds whatever the grader's user."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from autograder.sandbox import outside

pytestmark = pytest.mark.skipif(bool(outside.strict_missing()), reason="this machine cannot give the strict level")

# Builds a strict jail in a fresh process with every open for writing recorded, then prints the
# record from inside the jail (pid 1 of its namespace).
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

    plan = jail.plan_for(jail.STRICT, sys.argv[2], memory_bytes=0, file_bytes=0, count_reads=False,
                         pids_cgroup=sys.argv[1])
    os.open, builtins.open = os_open, open_
    jail.enter(plan)
    print(json.dumps({"pid": os.getpid(), "written": written}), flush=True)
""")


def test_building_the_jail_never_writes_a_machine_wide_setting(root, tmp_path):
    """Nothing under /proc/sys is written while a strict jail is built (as root too). On Linux
    6.12-6.13 kernel.pid_max is the machine's: a root grader's jail once set it to 400 for every
    user of the machine."""
    cgroup = outside._pids_cgroup()  # as root, the grader's pids cgroup is joined (a write it may make)
    try:
        done = subprocess.run([sys.executable, "-c", _ENTER_AND_RECORD, cgroup, str(tmp_path)], cwd=root, capture_output=True,
                              text=True, timeout=60)
    finally:
        if cgroup:
            outside._remove_cgroup(cgroup)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["pid"] == 1  # inside its own pid namespace: the jail was really built
    assert not [p for p in record["written"] if p.startswith("/proc/sys")], record["written"]
    assert set(record["written"]) <= {"/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map"} | (
        {f"{cgroup}/cgroup.procs"} if cgroup else set()), record["written"]


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

    monkeypatch.setattr(outside, "_pids_cgroup", lambda: "")
    run = outside.Worker(_FORK_UNTIL_REFUSED, "probe", [()], timeout=60, level=outside.STRICT, bare=True).wait()
    assert run.status == "ok", run.stderr_tail
    forked, err = run.cases[0]["value"]
    assert err == errno.EAGAIN and forked < jail.MAX_TASKS, (forked, err)
