"""A root grader's cgroups for each worker: the whole tree's processes, memory (memfds and tmpfs
pages included) and an equal CPU share whatever its number of threads. Made before the worker
starts (it joins them in its jail), removed when it ends; none where the grader is not root.
"""

from __future__ import annotations

import os
import time
import uuid
from functools import lru_cache

from autograder.limits import DEFAULT_MEMORY, MAX_TASKS, SCRATCH_BYTES

CGROUP_ROOT = "/sys/fs/cgroup"


STALE_CGROUP_SECONDS = 600


@lru_cache(maxsize=1)
def sweep_stale_cgroups() -> int:
    """Remove the empty worker cgroups a grader killed outright (SIGKILL) left behind, once per
    grader: those older than :data:`STALE_CGROUP_SECONDS` (a live grader's are younger, or hold
    its worker, and the kernel refuses to remove a cgroup that holds a process). How many."""
    removed = 0
    for parent in [os.path.join(CGROUP_ROOT, c) for c in ("pids", "memory", "cpu")] + [_v2_base()]:
        try:
            names = [n for n in os.listdir(parent) if n.startswith("ckpt-worker-")]
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            try:
                if time.time() - os.stat(path).st_mtime > STALE_CGROUP_SECONDS:
                    os.rmdir(path)
                    removed += 1
            except OSError:
                continue
    return removed


def worker_cgroups(memory_bytes: int = DEFAULT_MEMORY) -> list[str]:
    """Cgroup folders made for one worker where the grader runs as root and may make them ([]
    if not): on cgroup v1, one per controller (pids, memory, cpu); on v2, one folder with each
    controller the grader's own cgroup delegates. The tree's memory: ``memory_bytes`` and its
    scratch tmpfs."""
    if os.geteuid() != 0:
        return []
    sweep_stale_cgroups()
    name = f"ckpt-worker-{uuid.uuid4().hex[:12]}"
    limits = {"pids": {"pids.max": str(MAX_TASKS)},
              "memory": {"memory.limit_in_bytes": str(memory_bytes + SCRATCH_BYTES)},
              "cpu": {}}  # a group of its own: one equal share, however many threads it runs
    made = []
    for controller, files in limits.items():
        path = _make_cgroup(os.path.join(CGROUP_ROOT, controller, name), files)
        if path:
            made.append(path)
    if made:
        return made
    base = _v2_base()  # v2: one folder below the grader's own cgroup
    try:
        delegated = open(os.path.join(base, "cgroup.subtree_control")).read().split()
    except OSError:
        return []
    v2 = {"pids": {"pids.max": str(MAX_TASKS)},
          "memory": {"memory.max": str(memory_bytes + SCRATCH_BYTES), "memory.swap.max": "0"},
          "cpu": {}}
    files = {k: v for controller, kv in v2.items() if controller in delegated for k, v in kv.items()}
    path = _make_cgroup(os.path.join(base, name), files) if delegated else ""
    return [path] if path else []


def _v2_base() -> str:
    """The grader's own cgroup on cgroup v2 ('' if none)."""
    try:
        own = next(line.split(":", 2)[2] for line in open("/proc/self/cgroup").read().splitlines()
                   if line.startswith("0::"))
    except (OSError, StopIteration):
        return ""
    return CGROUP_ROOT + own.rstrip("/")


def _make_cgroup(path: str, files: dict) -> str:
    try:
        os.mkdir(path)
    except OSError:
        return ""
    try:
        for key, value in files.items():
            with open(os.path.join(path, key), "w") as f:
                f.write(value)
        return path
    except OSError:
        remove_cgroup(path)
        return ""


def remove_cgroup(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)
