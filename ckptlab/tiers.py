"""Checkpoints in tiers as Orbax's emergency (multi-tier) ``CheckpointManager`` keeps them, run for real
on CPU processes joined by ``jax.distributed`` (Lesson 8, and the grader's folders for problem 8.2).

    from ckptlab.tiers import TierSpec, run_tiers
    run = run_tiers(root, TierSpec(slices=3), {"whole": (), "host 2 lost": (("lost", 2),)})
    run.held["local/1"]            # [8, 10, 12]: the steps process 1's local tier committed
    run.restored["host 2 lost"]    # Restored(step=12, slice=1, ...): what Orbax itself restored

A job of ``slices * per_slice`` processes, each with ``devices_per_process`` CPU devices, on one mesh
``(replica=slices, data=per_slice * devices_per_process)``: replica slice ``k`` is processes
``k * per_slice`` to ``(k + 1) * per_slice - 1``. Orbax's manager (``orbax.checkpoint.experimental.
emergency.checkpoint_manager.CheckpointManager``) gives the slices two roles: the primary slice (0)
saves the whole state to the persistent tier (``persistent/``, every ``persistent_every`` steps), and
every other slice saves to its processes' local tiers (``local/<process>/``, a RAM disk in production,
every ``local_every`` steps), each process its own shards of its slice's copy. Its restore takes the
newest of the steps some slice holds complete locally and the persistent tier's (a tie: the local
copy), reads it on that one slice and broadcasts it to the others.

:func:`run_tiers` saves ``steps`` steps once, then for each named case copies what was saved, damages
the copy (each harm in order, on what the ones before left) and restores it with Orbax's manager in
the same processes, reporting what Orbax restored, from where, and whether every process holds the
state of that step. The harms are what preemptions leave:

- ``("lost", p)``: process p's local tier emptied (its machine replaced; its RAM disk is gone);
- ``("cut", p)``: process p's newest local step renamed to a temporary name (killed mid-save);
- ``("hole", p, k)``: process p's k-th newest local step gone (0: the newest);
- ``("persistent_cut",)``, ``("persistent_hole", k)``: the same, to the persistent tier;
- ``("corrupt", p, k)``: process p's k-th newest local step keeps its name and records but loses its
  arrays' data. Orbax trusts committed names: that restore raises on the process reading it while the
  others wait for its broadcast, so a case with it ends the job (it must come last).

:func:`make_tiers` writes the grader's folders: one job per shape, the learner's copy of each case
left damaged and Orbax's own restore of it noted beside (never inside) it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

from ckptlab.steps import TMP_MARK, committed_folders

COLUMNS = 16
JOB_TIMEOUT = 240.0  # seconds for one job: processes that start, save, restore and end (a few, here)


@dataclass(frozen=True)
class TierSpec:
    """One job's shape and cadence (Orbax's ``LocalCheckpointOptions`` and
    ``PersistentCheckpointOptions``: ``save_interval_steps`` and ``max_to_keep``)."""

    slices: int = 3
    per_slice: int = 1
    devices_per_process: int = 2
    steps: int = 12
    local_every: int = 2
    local_keep: int = 3
    persistent_every: int = 5
    persistent_keep: int = 2
    seed: int = 0

    @property
    def processes(self) -> int:
        return self.slices * self.per_slice

    def slice_of(self, process: int) -> int:
        return process // self.per_slice

    def slice_processes(self) -> list[list[int]]:
        """The processes of each replica slice, slice 0 (the primary) first."""
        return [list(range(k * self.per_slice, (k + 1) * self.per_slice)) for k in range(self.slices)]


@dataclass
class Restored:
    """What Orbax's emergency manager restored from one damaged copy: the step (None: it found none),
    the replica slice that read it (0: the primary slice, from the persistent tier; k >= 1: slice k,
    from its processes' local tiers), and per process whether it ended holding exactly that step's
    state (the broadcast included). ``error``: what a process raised (a damaged step)."""

    step: int | None
    slice: int | None
    tier: str | None
    latest: list = field(default_factory=list)  # each process's latest_step() before restoring
    exact: list = field(default_factory=list)  # each process: its shards equal the step's state, bit for bit
    error: str | None = None

    @property
    def answer(self):
        """``(step, slice)`` as problem 8.2 asks for it; None where nothing was restored."""
        return None if self.step is None else (self.step, self.slice)


@dataclass
class TierRun:
    """A job's report: what each tier committed (``held``: ``"local/<p>"`` and ``"persistent"`` to
    steps), each case's restore, the seconds the save took (all steps, the slowest process), and the
    seconds from the processes' start to their joining; ``errors``: what any process raised outside a
    restore (each ``"Type: message"``)."""

    held: dict
    restored: dict
    save_s: float
    start_s: float
    errors: list


def state_at(step: int, spec: TierSpec) -> dict:
    """The job's state after ``step`` steps (NumPy): ``w`` of ``(2 * data, COLUMNS)`` and ``b``, seeded by
    the step, so that a restored state tells its step."""
    import numpy as np

    rng = np.random.default_rng([spec.seed, step])
    data = spec.per_slice * spec.devices_per_process
    return {"w": rng.standard_normal((2 * data, COLUMNS)).astype(np.float32),
            "b": rng.standard_normal((COLUMNS,)).astype(np.float32)}


# ---------------------------------------------------------------------------------------------
# Harms: plain file operations on a copy (process 0 of the job applies them; the others wait)

def _tier(root: str, harm: tuple) -> str:
    return os.path.join(root, "persistent") if harm[0].startswith("persistent") else os.path.join(root, "local", str(harm[1]))


def _nth_newest(tier: str, k: int) -> str | None:
    steps = committed_folders(tier)
    names = [steps[s] for s in sorted(steps, reverse=True)]
    return os.path.join(tier, names[k]) if 0 <= k < len(names) else None


def damage(root: str, harms) -> None:
    """Apply each harm (see the module's docstring) to the tiers under ``root``, in order."""
    for harm in harms:
        harm = tuple(harm)
        kind, tier = harm[0], _tier(root, harm)
        if kind == "lost":
            shutil.rmtree(tier, ignore_errors=True)
            os.makedirs(tier)
        elif kind in ("cut", "persistent_cut"):
            newest = _nth_newest(tier, 0)
            if newest is not None:
                os.rename(newest, f"{newest}{TMP_MARK}-{int(time.time())}")
        elif kind in ("hole", "persistent_hole"):
            target = _nth_newest(tier, harm[-1])
            if target is not None:
                shutil.rmtree(target)
        elif kind == "corrupt":
            target = _nth_newest(tier, harm[2])
            if target is not None:
                state = os.path.join(target, "state")
                for entry in os.listdir(state):  # the arrays' data (OCDBT's files); the records kept
                    if entry.startswith(("ocdbt.process_", "d")) or entry == "manifest.ocdbt":
                        path = os.path.join(state, entry)
                        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
        else:
            raise ValueError(f"unknown harm {harm!r}")


def held(root: str, spec: TierSpec) -> dict:
    """The committed steps of each tier under ``root``: ``"local/<p>"`` for each process, and
    ``"persistent"`` (named by the step alone, as Orbax commits them)."""
    out = {f"local/{p}": sorted(committed_folders(os.path.join(root, "local", str(p)))) for p in range(spec.processes)}
    out["persistent"] = sorted(committed_folders(os.path.join(root, "persistent")))
    return out


# ---------------------------------------------------------------------------------------------
# One host of the job (``python -m ckptlab.tiers JOB.json PROCESS``)

class _Entries:
    """An Orbax logger keeping the entries the manager logs (its restore's statistics among them)."""

    def __init__(self):
        self.entries = []

    def log_entry(self, entry, *args, **kwargs):
        self.entries.append(entry)


def _join(job: dict, spec: TierSpec, process: int) -> float:
    """Join the job as ``process`` (gloo collectives, absl's flags parsed, the device ids mapped); its start."""
    from ckptlab.devices import prepare_environment

    prepare_environment(spec.devices_per_process)
    start = time.perf_counter()
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{job['port']}", num_processes=spec.processes, process_id=process,
                               initialization_timeout=120)
    from absl import flags, logging

    logging.set_verbosity(logging.ERROR)
    # Orbax's restore reads one of its absl flags; a program that never parsed its flags (this one, a
    # notebook) would raise "Trying to access flag ... before flags were parsed".
    flags.FLAGS.mark_as_parsed()
    if job.get("ids_call", True):
        from ckptlab.adapters.orbax_internals import initialize_distributed_to_device_ids

        initialize_distributed_to_device_ids()
    return start


class _HostTiers:
    """This process's side of the job: its mesh ``(replica, data)`` and Orbax's emergency managers on it."""

    def __init__(self, spec: TierSpec, process: int):
        import jax
        import numpy as np
        from orbax.checkpoint.experimental.emergency import checkpoint_manager as emergency

        self.spec, self.process = spec, process
        devices = np.array(jax.devices()).reshape(spec.slices, spec.per_slice * spec.devices_per_process)
        self.mesh = jax.sharding.Mesh(devices, ("replica", "data"))
        self.shardings = {"w": jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec("data", None)),
                          "b": jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec())}
        self.abstract = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=self.shardings[k])
                         for k, v in state_at(0, spec).items()}
        self.options = emergency.CheckpointManagerOptions(
            local=emergency.LocalCheckpointOptions(save_interval_steps=spec.local_every, max_to_keep=spec.local_keep),
            persistent=emergency.PersistentCheckpointOptions(save_interval_steps=spec.persistent_every,
                                                             max_to_keep=spec.persistent_keep),
            enable_async_checkpointing=False)

    def manager(self, root, logger=None):
        """A manager over ``root``'s tiers (this process's ``local/<process>``, and ``persistent``), made with the others."""
        from jax.experimental import multihost_utils
        from orbax.checkpoint.experimental.emergency import checkpoint_manager as emergency

        local = os.path.join(root, "local", str(self.process))
        os.makedirs(local, exist_ok=True)  # each process's own RAM disk, made by the caller as Orbax asks
        os.makedirs(os.path.join(root, "persistent"), exist_ok=True)
        multihost_utils.sync_global_devices(f"tiers-dirs-{root}")
        return emergency.CheckpointManager(local, os.path.join(root, "persistent"), self.mesh, self.abstract,
                                           options=self.options, logger=logger)

    def exact(self, restored, step):
        """Whether this process's shards of ``restored`` are ``step``'s state, bit for bit."""
        import numpy as np

        want = state_at(step, self.spec)
        return all(np.array_equal(np.asarray(s.data), want[k][s.index])
                   for k, arr in restored.items() for s in arr.addressable_shards)

    def save_steps(self, root) -> list:
        """Offer every step of the job to a manager over ``root``, each state put on the mesh; the steps it saved."""
        import jax
        import orbax.checkpoint as ocp

        def on_mesh(values):
            return {k: jax.make_array_from_callback(v.shape, self.shardings[k], lambda index, v=v: v[index])
                    for k, v in values.items()}

        with self.manager(root) as mngr:
            saved = [s for s in range(1, self.spec.steps + 1)
                     if mngr.save(s, args=ocp.args.Composite(state=ocp.args.PyTreeSave(on_mesh(state_at(s, self.spec)))))]
            mngr.wait_until_finished()
        return saved


def _restore_task(tiers: _HostTiers, root: str) -> dict:
    """Restore the tiers under ``root`` with Orbax's manager (then process 0 removes them); what this process
    says of it. A damaged step: ``error``, returned at once, manager left open (the caller ends the job)."""
    from jax.experimental import multihost_utils

    logger = _Entries()
    mngr = tiers.manager(root, logger)
    latest = mngr.latest_step()
    out = {"latest": None if latest is None else int(latest)}
    try:
        restored = mngr.restore(None)["state"]
    except FileNotFoundError as exc:  # no step anywhere: every process raises it alike, before any collective
        out["none"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - a damaged step: reported, then this process ends the job
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        return out
    else:
        stats = [e for e in logger.entries if isinstance(e, dict) and e.get("event_type") == "emergency_restore"]
        out["reading"] = bool(stats and stats[-1].get("is_restoring_slice"))
        out["directory"] = stats[-1].get("directory") if stats else None
        out["step"] = int(stats[-1]["step"]) if stats else None
        out["exact"] = out["step"] is not None and tiers.exact(restored, out["step"])
    mngr.close()
    multihost_utils.sync_global_devices(f"tiers-restored-{root}")
    if tiers.process == 0:
        shutil.rmtree(root, ignore_errors=True)
    return out


def _host(job: dict, process: int, report: int) -> None:
    """One process of the job; what it says of each task goes to ``report``, a file descriptor of its
    own (never its stdout, where a library's threads write too and may split a line)."""
    spec = TierSpec(**job["spec"])
    start = _join(job, spec, process)
    import jax
    import orbax.checkpoint  # noqa: F401 - the tasks' libraries, loaded before the start is said (it counts them)
    from jax.experimental import multihost_utils
    from orbax.checkpoint.experimental.emergency import checkpoint_manager  # noqa: F401

    def say(line: dict) -> None:  # a line per task, as it ends: a job ended early keeps what was done
        _report(report, {"process": process, **line})

    say({"start_s": time.perf_counter() - start})
    tiers = _HostTiers(spec, process)
    for number, task in enumerate(job["tasks"]):
        if "save" in task:
            t = time.perf_counter()
            saved = tiers.save_steps(task["save"])
            say({"task": number, "saved": saved, "seconds": time.perf_counter() - t})
        elif "copy" in task:
            if process == 0:
                shutil.copytree(task["copy"], task["to"], symlinks=True)
                damage(task["to"], task.get("damage", ()))
            multihost_utils.sync_global_devices(f"tiers-copy-{task['to']}")
        elif "restore" in task:
            out = _restore_task(tiers, task["restore"])
            say({"task": number, **out})
            if "error" in out:  # a damaged step: this process ends the job
                os._exit(1)
    jax.distributed.shutdown()
    say({"done": True})


# ---------------------------------------------------------------------------------------------
# The job, from this side: its processes started, watched, and ended

class TierJobFailed(RuntimeError):
    """A process of a tier job failed where nothing was meant to fail; the message has its last lines."""


def _die_with_parent() -> None:
    """A job's process, first thing (Linux): SIGKILL it when the process that started it ends, so that a
    grader killed by its container's memory leaves no job behind; ended at once if that is already so."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.environ.get("CKPT_TIERS_PARENT", str(os.getppid())) != str(os.getppid()):
        os._exit(1)


def _report(fd: int, line: dict) -> None:
    os.write(fd, (json.dumps(line) + "\n").encode())  # one write per line, to a file of this process's own


def _run_job(spec: TierSpec, tasks: list, *, ids_call: bool = True, timeout: float = JOB_TIMEOUT) -> list[dict]:
    """Start the job's processes (fresh interpreters, JAX on the CPU) and wait for them; the first to
    fail ends the others (they would wait for it in a collective until the coordinator's timeout).
    Returns, per process in order, ``{"start_s", "tasks": {number: line}, "done", "raised", "returncode",
    "tail"}``: what it said of each task it finished, whether it ended its job, what it raised (if it
    did), its last lines."""
    from ckptlab.twohost import free_port

    port = free_port()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"spec": asdict(spec), "tasks": tasks, "port": port, "ids_call": ids_call}, f)
        job_file = f.name
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env.update(JAX_PLATFORMS="cpu", PYTHONSAFEPATH="1")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (here, env.get("PYTHONPATH"))))
    logs = [tempfile.TemporaryFile("w+") for _ in range(spec.processes)]
    said_files = [tempfile.TemporaryFile("w+") for _ in range(spec.processes)]
    env["CKPT_TIERS_PARENT"] = str(os.getpid())
    procs = [subprocess.Popen([sys.executable, "-m", "ckptlab.tiers", job_file, str(p), str(said.fileno())], env=env,
                              stdout=log, stderr=subprocess.STDOUT, text=True, pass_fds=(said.fileno(),))
             for p, (log, said) in enumerate(zip(logs, said_files))]
    deadline = time.monotonic() + timeout
    try:
        while any(p.poll() is None for p in procs):
            if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        os.unlink(job_file)
    reports = []
    for proc, log, said_file in zip(procs, logs, said_files):
        log.seek(0)
        text = log.read()
        log.close()
        said_file.seek(0)
        lines = said_file.read().splitlines()
        said_file.close()
        report = {"start_s": None, "tasks": {}, "done": False, "returncode": proc.returncode}
        for line in lines:
            if line.startswith('{"process"'):
                said = json.loads(line)
                if "task" in said:
                    report["tasks"][said["task"]] = said
                report["start_s"] = said.get("start_s", report["start_s"])
                report["raised"] = said.get("raised", report.get("raised"))
                report["done"] = report["done"] or bool(said.get("done"))
        report["tail"] = "\n".join([x for x in text.strip().splitlines() if x.strip() and "[Gloo]" not in x][-15:])
        reports.append(report)
    return reports


def _restored(spec: TierSpec, outs: list) -> Restored:
    """One case's restore, from every process's line for it (an empty one: the process said nothing)."""
    errors = [o.get("error") for o in outs if o.get("error")]
    latest = [o.get("latest") for o in outs]
    if errors:
        return Restored(None, None, None, latest=latest, error=errors[0])
    if not all(outs):
        raise TierJobFailed("a process of the job said nothing of a restore")
    if any("none" in o for o in outs):
        return Restored(None, None, None, latest=latest)
    readers = sorted({spec.slice_of(p) for p, o in enumerate(outs) if o.get("reading")})
    steps = {o.get("step") for o in outs}
    directory = next((o.get("directory") for o in outs if o.get("reading")), "") or ""
    tier = "persistent" if f"{os.sep}persistent{os.sep}" in directory + os.sep else "local"
    if len(readers) != 1 or len(steps) != 1:
        raise TierJobFailed(f"the processes disagree on the restore: reading slices {readers}, steps {sorted(steps)}")
    return Restored(steps.pop(), readers[0], tier, latest=latest, exact=[bool(o.get("exact")) for o in outs])


def _case_tasks(saved: str, root: str, scratch: str, harms) -> list:
    """The learner's (or the lesson's) copy, damaged; a scratch copy of it, restored by Orbax."""
    return [{"copy": saved, "to": root, "damage": [list(h) for h in harms]},
            {"copy": root, "to": scratch}, {"restore": scratch}]


def run_tiers(root, spec: TierSpec, cases: dict, *, ids_call: bool = True, timeout: float = JOB_TIMEOUT) -> TierRun:
    """Save ``spec.steps`` steps into ``root/saved`` with Orbax's emergency manager in a real job, then for
    each case ``name: harms`` copy it to ``root/<name>``, damage the copy and restore it with Orbax (on a
    scratch copy of its own: Orbax's manager removes a local tier's temporary folders when it starts). A
    case with a ``corrupt`` harm must come last: it ends the job. Without ``ids_call`` the job runs as
    on TPU or GPU slices, without the device-id map (and fails: see :attr:`TierRun.errors`)."""
    root = os.path.abspath(os.fspath(root))
    saved = os.path.join(root, "saved")
    tasks = [{"save": saved}]
    for name, harms in cases.items():
        tasks += _case_tasks(saved, os.path.join(root, name), os.path.join(root, f".{name}.restore"), harms)
    reports = _run_job(spec, tasks, ids_call=ids_call, timeout=timeout)
    restored = {}
    for i, name in enumerate(cases):
        outs = [r["tasks"].get(3 + 3 * i, {}) for r in reports]
        if any(outs):
            restored[name] = _restored(spec, outs)
    errors = [r["raised"] for r in reports if r.get("raised")]
    saves = [r["tasks"][0]["seconds"] for r in reports if 0 in r["tasks"]]
    starts = [r["start_s"] for r in reports if r["start_s"] is not None]
    return TierRun(held(saved, spec) if os.path.isdir(saved) else {}, restored, max(saves, default=0.0),
                   max(starts, default=0.0), errors)


def make_tiers(jobs: list[tuple[str, TierSpec, tuple]], timeout: float = JOB_TIMEOUT) -> list[Restored]:
    """The grader's folders: for each ``(root, spec, harms)``, ``root`` left damaged as its harms say,
    and what Orbax's manager restores from it (restored on a copy, never read from ``root``). One job per
    spec: its steps saved once, each of its folders copied from them. Raises :class:`TierJobFailed` where
    a job fails (the grader's failure, never a learner's)."""
    out: list = [None] * len(jobs)
    by_spec: dict = {}
    for i, (_, spec, _) in enumerate(jobs):
        by_spec.setdefault(spec, []).append(i)
    for spec, indices in by_spec.items():
        base = tempfile.mkdtemp(prefix="tiers-saved-")
        try:
            saved = os.path.join(base, "saved")
            tasks = [{"save": saved}]
            for i in indices:
                root, _, harms = jobs[i]
                if any(tuple(h)[0] == "corrupt" for h in harms):
                    raise ValueError("a corrupt step ends the job: the grader's folders never hold one")
                tasks += _case_tasks(saved, os.path.abspath(os.fspath(root)), os.path.join(base, f"r{i}"), harms)
            reports = _run_job(spec, tasks, timeout=timeout)
            failed = next((r for r in reports if not r["done"]), None)
            if failed is not None:
                raise TierJobFailed(f"a tier job's process failed (exit {failed['returncode']}):\n{failed['tail']}")
            for n, i in enumerate(indices):
                out[i] = _restored(spec, [r["tasks"].get(3 + 3 * n, {}) for r in reports])
        finally:
            shutil.rmtree(base, ignore_errors=True)
    return out


if __name__ == "__main__":
    _die_with_parent()
    with open(sys.argv[1]) as f:
        _job = json.load(f)
    try:
        _host(_job, int(sys.argv[2]), int(sys.argv[3]))
    except BaseException as _exc:  # noqa: BLE001 - said, then ended at once: the others wait for it in a collective
        import traceback

        traceback.print_exc()
        _report(int(sys.argv[3]), {"process": int(sys.argv[2]), "raised": f"{type(_exc).__name__}: {_exc}"[:500]})
        os._exit(1)
    os._exit(0)  # after the report and the coordinator's shutdown: no interpreter teardown to wait for
