"""Checkpoints in tiers (Lesson 8, and the grader's folders for problem 8.2): a job of several hosts
saving each host's own shards often to a fast local tier (``local/<host>/``: a RAM disk in
production) and the whole state rarely to a persistent tier (``persistent/``), each tier an Orbax
``CheckpointManager`` of its own, as Orbax's emergency checkpointing keeps a local and a persistent
manager (its ``emergency.CheckpointManager`` would not start on these CPU processes: see Lesson 8).

    from ckptlab.tiers import TierSpec, write_tiers, newest_restorable
    write_tiers(root, TierSpec(hosts=2, steps=12, local_every=2, persistent_every=5))
    newest_restorable(root)        # (12, "local"): every host holds step 12 in its local tier

Each host's local tier is written by a manager of its own, holding only that host's rows of the
state (``{"w": ...}``, rows split evenly among the hosts), as a host's local save holds only its
shards. Then the folder is damaged as ``damage`` says, in order (each on what the ones before left),
as preemptions leave tiers:

- ``("lost", h)``: host h's local tier emptied (the machine was replaced; its RAM disk is gone);
- ``("cut", h)``: host h's newest local step renamed to its temporary name (killed mid-save, before
  the rename);
- ``("unreadable", h, k)``: host h's k-th newest local step (0: the newest) keeps its records but
  loses its arrays' data (committed, and does not restore);
- ``("persistent_cut",)`` and ``("persistent_unreadable", k)``: the same, to the persistent tier.

:func:`make_tiers` writes many folders in one helper process (``python -m ckptlab.tiers``), so that
the grader's own process imports no JAX.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from ckptlab.steps import TMP_MARK, committed_folders

ROWS_PER_HOST = 4
COLUMNS = 8


@dataclass(frozen=True)
class TierSpec:
    hosts: int = 2
    steps: int = 12
    local_every: int = 2
    local_keep: int = 3
    persistent_every: int = 5
    persistent_keep: int = 2
    seed: int = 0
    damage: tuple = ()


def state_at(step: int, spec: TierSpec):
    """The job's state after ``step`` steps: one float32 array of ``hosts * 4`` rows."""
    import numpy as np

    rng = np.random.default_rng([spec.seed, step])
    return {"w": rng.standard_normal((spec.hosts * ROWS_PER_HOST, COLUMNS)).astype(np.float32),
            "step": np.int64(step)}


def host_rows(state: dict, host: int) -> dict:
    rows = slice(host * ROWS_PER_HOST, (host + 1) * ROWS_PER_HOST)
    return {"w": state["w"][rows], "step": state["step"]}


def _manager(folder: str, every: int, keep: int):
    import orbax.checkpoint as ocp

    return ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(
        save_interval_steps=every, max_to_keep=keep, enable_async_checkpointing=False), item_names=("state",))


def write_tiers(root, spec: TierSpec) -> dict:
    """Save ``spec.steps`` steps into ``root``'s tiers, then damage it. Returns the seconds spent
    saving each tier (``local``: all hosts' saves together) and the bytes each tier holds."""
    import orbax.checkpoint as ocp

    root = os.fspath(root)
    locals_ = [_manager(os.path.join(root, "local", str(h)), spec.local_every, spec.local_keep)
               for h in range(spec.hosts)]
    persistent = _manager(os.path.join(root, "persistent"), spec.persistent_every, spec.persistent_keep)
    seconds = {"local": 0.0, "persistent": 0.0}
    for step in range(1, spec.steps + 1):
        state = state_at(step, spec)
        t = time.perf_counter()
        for h, m in enumerate(locals_):
            m.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(host_rows(state, h))))
        seconds["local"] += time.perf_counter() - t
        t = time.perf_counter()
        persistent.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state)))
        seconds["persistent"] += time.perf_counter() - t
    for m in (*locals_, persistent):
        m.wait_until_finished()
        m.close()
    for harm in spec.damage:
        _damage(root, tuple(harm))
    return {"seconds": seconds, "bytes": {"local": _size(os.path.join(root, "local")),
                                          "persistent": _size(os.path.join(root, "persistent"))}}


def _size(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def _newest(folder: str, k: int = 0) -> str | None:
    steps = committed_folders(folder)
    names = [steps[s] for s in sorted(steps, reverse=True)]
    return os.path.join(folder, names[k]) if k < len(names) else None


def _unreadable(step_folder: str) -> None:
    state = os.path.join(step_folder, "state")
    for entry in os.listdir(state):  # the arrays' data (OCDBT's files), the records kept
        if entry.startswith(("ocdbt.process_", "d")) or entry == "manifest.ocdbt":
            target = os.path.join(state, entry)
            shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)


def _damage(root: str, harm: tuple) -> None:
    kind = harm[0]
    tier = os.path.join(root, "persistent") if kind.startswith("persistent") else os.path.join(root, "local", str(harm[1]))
    if kind == "lost":
        shutil.rmtree(tier)
        os.makedirs(tier)
    elif kind in ("cut", "persistent_cut"):
        newest = _newest(tier)
        if newest is not None:
            os.rename(newest, newest + TMP_MARK)
    elif kind in ("unreadable", "persistent_unreadable"):
        target = _newest(tier, harm[-1])
        if target is not None:
            _unreadable(target)
    else:
        raise ValueError(f"unknown damage {harm!r}")


def _restores(step_folder: str) -> bool:
    import orbax.checkpoint as ocp

    try:
        with ocp.StandardCheckpointer() as checkpointer:
            checkpointer.restore(os.path.join(step_folder, "state"))
    except Exception:  # noqa: BLE001 - any failure to restore: not restorable
        return False
    return True


def restorable_steps(tier: str) -> set:
    """The steps of one tier's folder that committed (named by the step alone) and whose ``state``
    restores."""
    return {s for s, name in committed_folders(tier).items() if _restores(os.path.join(tier, name))}


def newest_restorable(root) -> tuple | None:
    """``(step, tier)``: the newest step the job can restore, ``"local"`` where every host's local
    tier restores it, else ``"persistent"``; None where no step restores."""
    root = os.fspath(root)
    local = os.path.join(root, "local")
    hosts = sorted(os.listdir(local), key=int)
    common = set.intersection(*(restorable_steps(os.path.join(local, h)) for h in hosts)) if hosts else set()
    persistent = restorable_steps(os.path.join(root, "persistent"))
    if not common and not persistent:
        return None
    step = max(common | persistent)
    return step, "local" if step in common else "persistent"


def make_tiers(jobs: list[tuple[str, TierSpec]], timeout: float = 180.0) -> list[dict]:
    """:func:`write_tiers` for each ``(root, spec)``, in one helper process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    payload = json.dumps([[root, asdict(spec)] for root, spec in jobs])
    proc = subprocess.run([sys.executable, "-m", "ckptlab.tiers"], input=payload, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the tier writer failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    from absl import logging

    logging.set_verbosity(logging.ERROR)
    jobs = json.loads(sys.stdin.read())
    out = []
    for root, spec in jobs:
        spec["damage"] = tuple(tuple(h) for h in spec.get("damage", ()))
        out.append(write_tiers(root, TierSpec(**spec)))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
