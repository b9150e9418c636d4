"""A root grader's cgroups for each worker: the whole tree's processes, memory (memfds and tmpfs
pages included) and an equal CPU share whatever its number of threads. Made before the worker
starts (it joins them in its jail), removed when it ends; none where the grader is not root. Each
is made below the grader's own cgroup, so that the limits of the container the grader runs in
(Gradescope's, say: memory and a CPU quota) hold for its workers too.

Also what those limits are (:func:`container_limits`: the memory and CPUs the grader's own
cgroups allow, cgroup v1 and v2, else the machine's), and whether the kernel's OOM killer ended a
process (:func:`oom_kills`), which tells a worker killed for the container's memory from one that
ended itself.
"""

from __future__ import annotations

import os
import time
import uuid
from functools import lru_cache

from autograder.limits import DEFAULT_MEMORY, MAX_TASKS, SCRATCH_BYTES

CGROUP_ROOT = "/sys/fs/cgroup"


STALE_CGROUP_SECONDS = 600


def _own_paths() -> dict[str, str]:
    """The grader's own cgroup per v1 controller ({controller: path}) and, under "", its v2 cgroup."""
    out = {}
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        for controller in controllers.split(",") if controllers else [""]:
            out[controller] = path.rstrip("/")
    return out


def own_cgroup(controller: str) -> str:
    """The folder of the grader's own cgroup for a v1 ``controller`` (its hierarchy's root where the
    grader's is not readable): where its workers' cgroups are made, inside its limits."""
    base = os.path.join(CGROUP_ROOT, controller)
    own = base + _own_paths().get(controller, "")
    return own if os.path.isdir(own) else base


@lru_cache(maxsize=1)
def sweep_stale_cgroups() -> int:
    """Remove the empty worker cgroups a grader killed outright (SIGKILL) left behind, once per
    grader: those older than :data:`STALE_CGROUP_SECONDS` (a live grader's are younger, or hold
    its worker, and the kernel refuses to remove a cgroup that holds a process). How many."""
    removed = 0
    for parent in [own_cgroup(c) for c in ("pids", "memory", "cpu")] + [_v2_base()]:
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
        path = _make_cgroup(os.path.join(own_cgroup(controller), name), files)
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


# ---------------------------------------------------------------------------------------------
# The container's limits, as the grader's own cgroups set them

_UNLIMITED = 1 << 60  # v1 writes "no limit" as a number near 2**63


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _ancestors(folder: str, root: str) -> list[str]:
    """``folder`` and each folder above it up to ``root`` (a cgroup's limits hold for all below it)."""
    out = []
    while folder.startswith(root):
        out.append(folder)
        if folder == root:
            break
        folder = os.path.dirname(folder)
    return out


def machine_memory() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def container_limits() -> tuple[int, float]:
    """(bytes of memory, CPUs) the grader and its workers may use together: the tightest of the
    grader's own cgroup and those above it (v1: memory.limit_in_bytes, cpu.cfs_quota_us over
    cpu.cfs_period_us; v2: memory.max, cpu.max), else the machine's memory and its CPUs."""
    memory = machine_memory() or _UNLIMITED
    cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    own = _own_paths()
    v1 = os.path.join(CGROUP_ROOT, "memory")
    for folder in _ancestors(v1 + own.get("memory", ""), v1):
        value = _read(os.path.join(folder, "memory.limit_in_bytes"))
        if value.isdigit() and int(value) < _UNLIMITED:
            memory = min(memory, int(value))
    v1 = os.path.join(CGROUP_ROOT, "cpu")
    for folder in _ancestors(v1 + own.get("cpu", ""), v1):
        quota, period = _read(os.path.join(folder, "cpu.cfs_quota_us")), _read(os.path.join(folder, "cpu.cfs_period_us"))
        if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit() and int(period) > 0:
            cpus = min(cpus, int(quota) / int(period))
    if "" in own:
        for folder in _ancestors(CGROUP_ROOT + own[""], CGROUP_ROOT):
            value = _read(os.path.join(folder, "memory.max"))
            if value.isdigit():
                memory = min(memory, int(value))
            quota, _, period = _read(os.path.join(folder, "cpu.max")).partition(" ")
            if quota.isdigit() and period.strip().isdigit() and int(period) > 0:
                cpus = min(cpus, int(quota) / int(period))
    return memory, cpus


def oom_kills() -> int:
    """How many processes the kernel's OOM killer has ended on this machine so far (``/proc/vmstat``'s
    ``oom_kill``: any cgroup's, the container's included); -1 where the kernel does not say."""
    for line in _read("/proc/vmstat").splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return -1


def own_limit_reached(cgroup_folders: list[str]) -> bool:
    """Whether a worker's own memory cgroup reached its own limit (v1: ``memory.failcnt``; v2:
    ``memory.events``' ``max`` or ``oom``). Not which cgroup an OOM kill is counted in: v1 counts a
    kill in the victim's own cgroup whichever limit was reached, its container's included."""
    for folder in cgroup_folders:
        count = _read(os.path.join(folder, "memory.failcnt"))
        if count.isdigit() and int(count) > 0:
            return True
        for line in _read(os.path.join(folder, "memory.events")).splitlines():
            key, _, value = line.partition(" ")
            if key in ("max", "oom") and value.strip().isdigit() and int(value) > 0:
                return True
    return False


# ---------------------------------------------------------------------------------------------
# A container's limits, emulated (gradescope-try --memory --cpus; the tests of grading in one)

CPU_PERIOD_US = 100_000


def make_container(memory_bytes: int | None, cpus: float | None) -> tuple[list[str], str]:
    """(root) Cgroups below the grader's own holding a container's limits, as Gradescope's has
    (memory, swap none, and a CPU quota: ``cpus`` of :data:`CPU_PERIOD_US` per period), for a
    process to join (:func:`join`) before it starts the grader: (the folders to join, '') or ([],
    why not). On cgroup v2 the process joins a leaf of its own, ``grader``, inside the container
    (v2 puts no process beside child cgroups), so its workers get no cgroups of their own there."""
    if os.geteuid() != 0:
        return [], "making cgroups needs root"
    name = f"ckpt-container-{uuid.uuid4().hex[:12]}"
    v1 = {"memory": {"memory.limit_in_bytes": str(memory_bytes)} if memory_bytes else {},
          "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(int(cpus * CPU_PERIOD_US))} if cpus else {}}
    made = []
    for controller, files in v1.items():
        if files and os.path.isdir(os.path.join(CGROUP_ROOT, controller)):
            path = _make_cgroup(os.path.join(own_cgroup(controller), name), files)
            if not path:
                remove_container(made)
                return [], f"could not make a {controller} cgroup below {own_cgroup(controller)}"
            if controller == "memory" and os.path.exists(os.path.join(path, "memory.memsw.limit_in_bytes")):
                _write_quietly(os.path.join(path, "memory.memsw.limit_in_bytes"), str(memory_bytes))
            made.append(path)
    if made:
        return made, ""
    base = _v2_base()
    if not base:
        return [], "no cgroup v1 memory or cpu controller, and no cgroup v2"
    wanted = [c for c, on in (("memory", memory_bytes), ("cpu", cpus)) if on]
    files = {**({"memory.max": str(memory_bytes), "memory.swap.max": "0"} if memory_bytes else {}),
             **({"cpu.max": f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"} if cpus else {})}
    container = _make_cgroup(os.path.join(base, name), {})
    if not container:
        return [], f"could not make a cgroup below {base}"
    try:
        with open(os.path.join(container, "cgroup.subtree_control"), "w") as f:
            f.write(" ".join(f"+{c}" for c in wanted))
        for key, value in files.items():
            with open(os.path.join(container, key), "w") as f:
                f.write(value)
    except OSError as exc:
        remove_cgroup(container)
        return [], f"cgroup v2 would not delegate {', '.join(wanted)} to {container} ({exc.strerror})"
    leaf = _make_cgroup(os.path.join(container, "grader"), {})
    return ([leaf, container], "") if leaf else ([], f"could not make {container}/grader")


def _write_quietly(path: str, value: str) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        pass


def join(folders: list[str], pid: int) -> None:
    """Move process ``pid`` into each cgroup of ``folders`` (the first of a v2 pair: its leaf)."""
    for folder in folders:
        if os.path.basename(folder) != "grader" and any(f.startswith(folder + "/") for f in folders):
            continue  # a v2 container: its leaf was joined
        with open(os.path.join(folder, "cgroup.procs"), "w") as f:
            f.write(str(pid))


_JOIN_AND_EXEC = ("import os, sys\n"
                  "cut = sys.argv.index('--')\n"
                  "for folder in sys.argv[1:cut]:\n"
                  "    with open(os.path.join(folder, 'cgroup.procs'), 'w') as f:\n"
                  "        f.write(str(os.getpid()))\n"
                  "os.execvp(sys.argv[cut + 1], sys.argv[cut + 1:])\n")


def command_inside(folders: list[str], command: list[str]) -> list[str]:
    """``command`` started inside the container ``folders`` (:func:`make_container`): a small Python
    joins it, then becomes the command (no fork hook runs in the caller, which may be threaded)."""
    import sys

    leaves = [f for f in folders if not any(g.startswith(f + "/") for g in folders)]
    return [sys.executable, "-c", _JOIN_AND_EXEC, *leaves, "--", *command]


def container_peak(folders: list[str]) -> int | None:
    """The most memory the processes of a container (or of a worker's own cgroups) held at once, in
    bytes (v1: ``memory.max_usage_in_bytes``; v2: ``memory.peak``, kernel 5.19 and later); None where
    the kernel does not say."""
    for folder in folders:
        for name in ("memory.max_usage_in_bytes", "memory.peak"):
            value = _read(os.path.join(folder, name))
            if value.isdigit():
                return int(value)
    return None


def container_own_memory(folders: list[str]) -> int | None:
    """What the container's processes hold themselves now, in bytes: anonymous memory and shared
    memory (tmpfs scratch folders, memfds), not the page cache of files they read or wrote, which
    the kernel reclaims when memory runs short (v1 ``memory.stat``'s total_rss and total_shmem;
    v2 its anon and shmem)."""
    for folder in folders:
        stat = dict(line.split(" ", 1) for line in _read(os.path.join(folder, "memory.stat")).splitlines() if " " in line)
        for keys in (("total_rss", "total_shmem"), ("anon", "shmem")):
            if all(k in stat and stat[k].strip().isdigit() for k in keys):
                return sum(int(stat[k]) for k in keys)
    return None


class OwnMemoryPeak:
    """:func:`container_own_memory`'s peak, sampled on a thread every ``interval`` seconds until
    :meth:`stop` (which returns it, in bytes; None where the kernel does not say)."""

    def __init__(self, folders: list[str], interval: float = 0.02):
        import threading

        self.folders, self.interval, self.peak = folders, interval, None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="ckpt-container-memory")
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            now = container_own_memory(self.folders)
            if now is not None:
                self.peak = max(self.peak or 0, now)
            self.done.wait(self.interval)

    def stop(self) -> int | None:
        self.done.set()
        self.thread.join()
        return self.peak


def remove_container(folders: list[str]) -> None:
    """Remove what :func:`make_container` made, once no process is left in it (leaves first)."""
    for folder in sorted(folders, key=len, reverse=True):
        remove_cgroup(folder)


def parse_bytes(text: str) -> int:
    """'768M', '1.5G', '512k' or a number of bytes -> bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
