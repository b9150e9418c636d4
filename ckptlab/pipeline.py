"""The data pipeline's position, saved with the model (Lesson 8): real processes, one per host,
joined by ``jax.distributed`` on localhost, each reading its share of a shuffled dataset of example
ids with Grain, training for some steps, and saving with Orbax's ``CheckpointManager``; then a fresh
job resuming from that save, with the same number of hosts or another.

    from ckptlab.pipeline import run_job
    first = run_job(folder, hosts=2, steps=3, how="grain")            # saves at step 3
    then = run_job(folder, hosts=2, steps=3, how="grain", resume=True)
    first.seen + then.seen                                            # every example id read, in order

How a job keeps its position (``how``):

- ``"grain"``: each host's iterator (``ds.slice(host::hosts).batch(per_host)``) is a checkpoint item
  of its own, written by Grain's handler (``grain.checkpoint.CheckpointSave``: one JSON file per
  process, ``process_{i}-of-{n}.json``) beside the model's state, and restored by it;
- ``"restart"``: the model's state restored, the pipeline started again from its beginning (the
  data item forgotten);
- ``"index"``: no pipeline state at all: the global step, saved with the model, says where each
  host reads (global positions ``step * global_batch + host * per_host`` onward in the shuffled
  order), whatever the number of hosts.

The global batch is kept (``global_batch``); each host reads ``global_batch / hosts`` examples a
step. What each host read comes back from each process, in the order it read it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

_HOST = r"""
import json, sys
job = json.loads(sys.argv[1])
from ckptlab.devices import prepare_environment

prepare_environment(1)
import jax

if job["hosts"] > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{job['port']}", num_processes=job["hosts"], process_id=job["host"],
                               initialization_timeout=120)
import grain
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

logging.set_verbosity(logging.ERROR)
hosts, host = job["hosts"], job["host"]
per_host = job["global_batch"] // hosts
order = grain.MapDataset.range(job["examples"]).shuffle(seed=job["seed"])  # the global order, every host alike
iterator = iter(order.slice(slice(host, None, hosts)).batch(per_host).to_iter_dataset())
names = ("state", "data") if job["how"] == "grain" else ("state",)
manager = ocp.CheckpointManager(job["folder"], item_names=names)
step, report = 0, {"host": host, "seen": [], "error": None}
if job["resume"]:
    latest = manager.latest_step()
    try:
        if job["how"] == "grain":
            restored = manager.restore(latest, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(), data=grain.checkpoint.CheckpointRestore(iterator)))
        else:
            restored = manager.restore(latest, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
        step = int(restored["state"]["step"])
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
if report["error"] is None:
    for _ in range(job["steps"]):
        if job["how"] == "index":
            start = step * job["global_batch"] + host * per_host
            batch = [int(order[i]) for i in range(start, start + per_host)]
        else:
            batch = [int(x) for x in next(iterator)]
        report["seen"].append(batch)
        step += 1
    args = {"state": ocp.args.StandardSave({"step": np.int64(step)})}
    if job["how"] == "grain":
        args["data"] = grain.checkpoint.CheckpointSave(iterator)
    manager.save(step, args=ocp.args.Composite(**args))
    manager.wait_until_finished()
report["step"] = step
print(json.dumps(report), flush=True)
if hosts > 1:
    jax.distributed.shutdown()
"""


@dataclass
class JobResult:
    """What each host of one job read (per step, in order), and the step it saved at."""

    hosts: int
    how: str
    seen: list  # per host, its batches in order
    step: int
    errors: list = field(default_factory=list)  # per host, why its restore failed (None: it did not)

    @property
    def by_step(self) -> list:
        """Per step, the ids every host read in it, sorted: what one global batch held."""
        steps = max((len(s) for s in self.seen), default=0)
        return [sorted(i for batches in self.seen if k < len(batches) for i in batches[k]) for k in range(steps)]

    @property
    def ids(self) -> list:
        """Every example id the job read, all hosts, step by step."""
        steps = max((len(s) for s in self.seen), default=0)
        return [i for k in range(steps) for batches in self.seen if k < len(batches) for i in batches[k]]


def run_job(folder, hosts: int, steps: int, how: str = "grain", resume: bool = False, examples: int = 48,
            global_batch: int = 8, seed: int = 0, timeout: float = 120.0) -> JobResult:
    """Run one job of ``hosts`` processes for ``steps`` steps in ``folder`` (its checkpoints), from
    the start or (``resume``) from its newest save; see the module's text."""
    from ckptlab.twohost import free_port, run_hosts

    if how not in ("grain", "restart", "index"):
        raise ValueError(f"how is 'grain', 'restart' or 'index', not {how!r}")
    if global_batch % hosts:
        raise ValueError(f"a global batch of {global_batch} cannot be split over {hosts} hosts")
    port = free_port()
    commands = [[sys.executable, "-c", _HOST, json.dumps({
        "hosts": hosts, "host": h, "port": port, "folder": str(Path(folder).resolve()), "steps": steps, "how": how,
        "resume": resume, "examples": examples, "global_batch": global_batch, "seed": seed})] for h in range(hosts)]
    reports = sorted(run_hosts(commands, timeout, "pipeline host"), key=lambda r: r["host"])
    return JobResult(hosts, how, [r["seen"] for r in reports], max(r["step"] for r in reports),
                     [r["error"] for r in reports])


def global_order(examples: int = 48, seed: int = 0) -> list:
    """The shuffled order every host's pipeline draws from (Grain's, as the hosts build it)."""
    import grain

    order = grain.MapDataset.range(examples).shuffle(seed=seed)
    return [int(order[i]) for i in range(examples)]


__all__ = ["JobResult", "global_order", "run_job"]
