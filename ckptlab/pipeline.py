"""The data pipeline's position, saved with the model (Lesson 8): real processes, one per host,
joined by ``jax.distributed`` on localhost, each reading its share of a shuffled dataset of example
ids with Grain, training for some steps, and saving with Orbax's ``CheckpointManager``; then a fresh
job resuming from that save, with the same number of hosts or another.

    from ckptlab.pipeline import run_job
    first = run_job(folder, hosts=2, steps=3, how="grain")            # saves at step 3
    then = run_job(folder, hosts=2, steps=3, how="grain", resume=True)
    first.seen + then.seen                                            # every example id read, in order

How a job keeps its position (``how``):

- ``"grain"``: each host's iterator (its rows of each global batch:
  ``ds.batch(global_batch).map(lambda b: b[host * per_host:(host + 1) * per_host])``) is a checkpoint
  item of its own, written by Grain's handler (``grain.checkpoint.CheckpointSave``: one JSON file per
  process, ``process_{i}-of-{n}.json``) beside the model's state, and restored by it;
- ``"restart"``: the model's state restored, the pipeline started again from its beginning (the
  data item forgotten);
- ``"index"``: no pipeline state at all: the global step, saved with the model, says where each
  host reads (global positions ``step * global_batch + host * per_host`` onward in the shuffled
  order), whatever the number of hosts.

The global batch is kept (``global_batch``); each host reads ``global_batch / hosts`` consecutive
rows of it a step (host ``h`` rows ``h * per_host`` onward: problem 8.1's layout), and the hosts
hand them to ``jax.make_array_from_process_local_data``, which assembles the global batch; host 0
reports it as JAX holds it (gathered with ``multihost_utils.process_allgather``), row by row. What
each host read comes back from each process, in the order it read it.

:func:`prefetch_restore` is the other per-process state Grain keeps: an iterator under
``mp_prefetch`` (worker processes reading ahead) saves one state per worker, and is restored into
iterators with other worker counts, in one fresh process.
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
from jax.experimental import multihost_utils

logging.set_verbosity(logging.ERROR)
hosts, host = job["hosts"], job["host"]
per_host = job["global_batch"] // hosts
order = grain.MapDataset.range(job["examples"]).shuffle(seed=job["seed"])  # the global order, every host alike
iterator = iter(order.batch(job["global_batch"]).map(lambda b: b[host * per_host:(host + 1) * per_host])
                .to_iter_dataset())  # this host's rows of each global batch
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("data",))  # one device per host, in process order
rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
names = ("state", "data") if job["how"] == "grain" else ("state",)
manager = ocp.CheckpointManager(job["folder"], item_names=names)
step, report = 0, {"host": host, "seen": [], "assembled": [], "error": None}
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
        assembled = jax.make_array_from_process_local_data(rows, np.asarray(batch, np.int32), (job["global_batch"],))
        report["assembled"].append([int(i) for i in multihost_utils.process_allgather(assembled, tiled=True)])
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
    assembled: list = field(default_factory=list)  # per step, the global batch JAX assembled, row by row

    @property
    def by_step(self) -> list:
        """Per step, the ids every host read in it, sorted: what one global batch held."""
        steps = max((len(s) for s in self.seen), default=0)
        return [sorted(i for batches in self.seen if k < len(batches) for i in batches[k]) for k in range(steps)]

    @property
    def rows(self) -> list:
        """Per step, the hosts' reads one after another, host 0's first: the global batch row by row as
        ``jax.make_array_from_process_local_data`` lays it out (``assembled`` is what it did)."""
        steps = max((len(s) for s in self.seen), default=0)
        return [[i for batches in self.seen if k < len(batches) for i in batches[k]] for k in range(steps)]

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
                     [r["error"] for r in reports], reports[0]["assembled"])


_PREFETCH = r"""
import json, sys
job = json.loads(sys.argv[1])
from absl import flags

flags.FLAGS.mark_as_parsed()  # Grain's workers read absl flags: a script without absl.app parses none
import grain


def pipeline(workers):  # the same pipeline every time; only the number of worker processes changes
    ds = grain.MapDataset.range(job["examples"]).shuffle(seed=job["seed"]).batch(job["batch"]).to_iter_dataset()
    return iter(ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers)))


if __name__ == "__main__":
    saved = pipeline(job["saved_workers"])
    read = [next(saved).tolist() for _ in range(job["steps"])]
    state = saved.get_state()
    expected = [next(saved).tolist() for _ in range(job["steps"])]  # what an uninterrupted run reads next
    saved.close()
    outcomes = {}
    for workers in job["restored_workers"]:
        restored = pipeline(workers)
        try:
            restored.set_state(state)
            outcomes[workers] = {"error": None, "next": [next(restored).tolist() for _ in range(job["steps"])]}
        except Exception as exc:
            outcomes[workers] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", "next": None}
        restored.close()
    print(json.dumps({"read": read, "state": state, "expected": expected, "outcomes": outcomes}), flush=True)
"""


@dataclass
class PrefetchRestore:
    """An iterator under ``mp_prefetch`` saved with some workers, restored with others."""

    saved_workers: int
    state: dict  # Grain's state of the saved iterator, as ``get_state()`` returned it
    read: list  # the batches read before the save
    expected: list  # the batches the saved iterator read next: what a restored one must read
    outcomes: dict  # workers -> (error or None, the batches the restored iterator read next, or None)


def prefetch_restore(saved_workers: int = 2, restored_workers=(2, 1), steps: int = 3, examples: int = 48,
                     batch: int = 4, seed: int = 0, timeout: float = 120.0) -> PrefetchRestore:
    """In one fresh process: read ``steps`` batches from a Grain iterator prefetched by
    ``saved_workers`` worker processes, take its state, read ``steps`` more (what comes next), then
    restore that state into a new iterator of each worker count of ``restored_workers`` and read
    ``steps`` batches from it (or keep the error it raised)."""
    from ckptlab.twohost import run_hosts

    command = [sys.executable, "-c", _PREFETCH, json.dumps({
        "saved_workers": saved_workers, "restored_workers": list(restored_workers), "steps": steps,
        "examples": examples, "batch": batch, "seed": seed})]
    report = run_hosts([command], timeout, "prefetching process")[0]
    return PrefetchRestore(saved_workers, report["state"], report["read"], report["expected"],
                           {int(w): (o["error"], o["next"]) for w, o in report["outcomes"].items()})


def global_order(examples: int = 48, seed: int = 0) -> list:
    """The shuffled order every host's pipeline draws from (Grain's, as the hosts build it)."""
    import grain

    order = grain.MapDataset.range(examples).shuffle(seed=seed)
    return [int(order[i]) for i in range(examples)]


__all__ = ["JobResult", "PrefetchRestore", "global_order", "prefetch_restore", "run_job"]
