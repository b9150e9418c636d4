"""A restore run for real beside its plan: ``python -m ckptlab measure`` (``measure_restore``).

    from ckptlab.tool.measuring import measure_restore, measured_text
    result = measure_restore("ckpt", mesh={"data": 2, "model": 8}, specs=..., hosts=2)
    print(measured_text(result))

The plan (:mod:`ckptlab.tool.planning`) says what each host should read and hold; here ``hosts`` fresh
processes, joined by ``jax.distributed`` on localhost (CPU devices), restore the checkpoint with
the plan's layout and count what they read and held. A checkpoint on local disk is restored by
Orbax and its reads counted by the kernel (``rchar``, after a warm-up restore); one in object
storage (``s3://``, :mod:`ckptlab.tool.objectstore`) is restored by TensorStore, shard by shard as
Orbax does underneath (Orbax 0.12.8 cannot open an ``s3://`` array), and its reads counted by
TensorStore (the bodies of its range GETs).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile

from ckptlab.tool import objectstore
from ckptlab.tool.inspection import leaf_keys, path_text
from ckptlab.tool.planning import plan_restore


def restore_targets(tree, mesh, specs: dict) -> tuple:
    """What the measuring restore asks ``PyTreeCheckpointer`` for, from Orbax's metadata ``tree``:
    (item, restore_args), each array placed on ``mesh`` (a ``Mesh``) with its spec ({leaf keys:
    spec}), every leaf that is not an array a placeholder, left unread."""
    import jax
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec

    def target(keypath, m):
        if not (hasattr(m, "shape") and hasattr(m, "storage")):
            return ocp.PLACEHOLDER
        sharding = NamedSharding(mesh, PartitionSpec(*specs[leaf_keys(keypath)]))
        return jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=sharding)

    item = jax.tree_util.tree_map_with_path(target, tree, is_leaf=lambda x: hasattr(x, "storage"))
    args = jax.tree.map(lambda t: ocp.PLACEHOLDER if t is ocp.PLACEHOLDER else ocp.ArrayRestoreArgs(
        restore_type=jax.Array, sharding=t.sharding, global_shape=t.shape, dtype=t.dtype), item)
    return item, args


def restored_bytes(tree, restored) -> tuple[int, dict]:
    """(the bytes this process's devices hold of ``restored``, {path: [saved dtype, restored dtype]}
    for the arrays restored in another dtype than Orbax's metadata ``tree`` says: int64 as int32, and
    float64 as float32, where JAX's x64 is off)."""
    import jax

    saved = {leaf_keys(k): m for k, m in jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: hasattr(x, "storage"))[0]}
    held, narrowed = 0, {}
    for keypath, leaf in jax.tree_util.tree_flatten_with_path(restored)[0]:
        if not isinstance(leaf, jax.Array):
            continue  # a placeholder: a leaf that is not an array
        held += sum(s.data.nbytes for s in leaf.addressable_shards)
        keys = leaf_keys(keypath)
        if str(leaf.dtype) != str(saved[keys].dtype):
            narrowed[path_text(keys)] = [str(saved[keys].dtype), str(leaf.dtype)]
    return held, narrowed


_CHILD = r"""
import json, os, sys
args = json.loads(sys.argv[1])
from ckptlab.devices import prepare_environment

prepare_environment(args["per_host"])
import jax

if args["hosts"] > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{args['port']}", num_processes=args["hosts"], process_id=args["host"],
                               initialization_timeout=120)
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ckptlab.readcount import count_reads
from ckptlab.memory import reset_peak, settle, status_bytes

logging.set_verbosity(logging.ERROR)
devices = np.array(sorted(jax.devices(), key=lambda d: d.id)).reshape(tuple(args["mesh"].values()))
mesh = Mesh(devices, tuple(args["mesh"]))
from ckptlab.tool.measuring import restore_targets, restored_bytes, restore_with_tensorstore

checkpointer = ocp.StandardCheckpointer()
tree = checkpointer.metadata(args["path"]).item_metadata.tree
specs = {tuple(keys): tuple(tuple(e) if isinstance(e, list) else e for e in s) for keys, s in args["specs"]}
item, restore_args = restore_targets(tree, mesh, specs)  # the arrays; a string is not one (a placeholder)
# Warm-up on a small checkpoint of its own: what a first save and restore load once (modules,
# TensorStore's drivers), without the memory of a restore of this one (which the next would reuse).
small = jax.make_array_from_callback((mesh.size, 4), NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names))),
                                     lambda index: np.ones((mesh.size, 4), np.float32)[index])
checkpointer.save(args["warm"], {"w": small})
checkpointer.wait_until_finished()
jax.block_until_ready(checkpointer.restore(args["warm"], {"w": jax.ShapeDtypeStruct(small.shape, small.dtype,
                                                                                    sharding=small.sharding)}))
if args["kvstore"]:  # in object storage: TensorStore's S3 driver loaded, the manifest read, before the count
    from ckptlab.tool.objectstore import s3_bytes_read
    import tensorstore as ts

    ts.KvStore.open(args["kvstore"]).result().read("manifest.ocdbt").result()
settle()  # nothing freed before the restore is there for it to reuse: what it holds shows in its peak
reset_peak()
before = status_bytes("VmRSS")
if args["kvstore"]:
    start = s3_bytes_read()
    restored = restore_with_tensorstore(args["kvstore"], tree, item)
    jax.block_until_ready([x for x in jax.tree.leaves(restored) if isinstance(x, jax.Array)])
    read = s3_bytes_read() - start
else:
    with count_reads(whole_process=True) as reads:
        restored = ocp.PyTreeCheckpointer().restore(args["path"], args=ocp.args.PyTreeRestore(
            item=item, restore_args=restore_args))
        jax.block_until_ready([x for x in jax.tree.leaves(restored) if isinstance(x, jax.Array)])
    read = reads.bytes
peak = status_bytes("VmHWM") - before
held, narrowed = restored_bytes(tree, restored)
print(json.dumps({"host": jax.process_index(), "read": read, "peak": peak, "held": held, "narrowed": narrowed,
                  "pid": os.getpid()}), flush=True)
if args["hosts"] > 1:
    jax.distributed.shutdown()
"""


def measure_restore(path, mesh: dict, specs: dict | None = None, hosts: int = 1, step: int | None = None,
                    timeout: float = 600, max_chunks: int | None = None, max_bytes: int | None = None) -> dict:
    """Restore ``path`` for real onto ``mesh`` with the plan's specs, in ``hosts`` fresh processes
    joined by ``jax.distributed`` on localhost (CPU devices), each counting what it read (the
    kernel's ``rchar``, after a warm-up restore) and its peak resident set above where it started
    (``VmHWM`` reset before the restore). Returns the plan beside the measurement."""
    from ckptlab.twohost import free_port, run_hosts

    plan = plan_restore(path, mesh, specs, hosts, step, max_chunks=max_chunks, max_bytes=max_bytes, restoring=True)
    chosen = [[list(a.keys), [list(e) if isinstance(e, tuple) else e for e in a.spec]] for a in plan.arrays]
    port = free_port()
    per_host = math.prod(plan.mesh.values()) // hosts
    remote = objectstore.kvstore(plan.folder) if objectstore.copy_of(plan.folder) is not None else None
    with tempfile.TemporaryDirectory(prefix="measure-") as warm:
        commands = [[sys.executable, "-c", _CHILD, json.dumps({"path": os.path.abspath(plan.folder), "mesh": plan.mesh,
                                                               "specs": chosen, "hosts": hosts, "host": h, "port": port,
                                                               "per_host": per_host, "warm": os.path.join(warm, "w"),
                                                               "kvstore": remote})]
                    for h in range(hosts)]
        reports = sorted(run_hosts(commands, timeout, "restoring host"), key=lambda r: r["host"])
    return {"plan": plan, "read": [r["read"] for r in reports], "peak": [r["peak"] for r in reports],
            "held": [r["held"] for r in reports], "narrowed": reports[0]["narrowed"], "pids": [r["pid"] for r in reports],
            "counted": "TensorStore's S3 bytes read (its GETs' bodies)" if remote else "the kernel's rchar"}


def restore_with_tensorstore(base: dict, tree, item):
    """``item`` (:func:`restore_targets`' arrays) read with TensorStore from the OCDBT database at
    kvstore ``base``, as Orbax reads it underneath: each array opened once, each distinct shard this
    process's devices hold read once by its index domain (replicas copied), no chunk cache shared
    between reads. For a checkpoint Orbax cannot open (an ``s3://`` one, with Orbax 0.12.8)."""
    import jax
    import numpy as np
    import tensorstore as ts

    saved = {leaf_keys(k): m for k, m in jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: hasattr(x, "storage"))[0]}
    # as Orbax's context: no cache of chunks, a cache of the B+tree's nodes (read once, not once per array)
    context = ts.Context({"cache_pool": {"total_bytes_limit": 0}, "cache_pool#ocdbt": {"total_bytes_limit": 100_000_000}})

    def one(keypath, target):
        if not isinstance(target, jax.ShapeDtypeStruct):
            return target  # a placeholder: a leaf that is not an array, left unread
        keys = leaf_keys(keypath)
        kvstore = {"driver": "ocdbt", "base": base, "path": f"{getattr(saved[keys], 'name', None) or '.'.join(keys)}/",
                   "cache_pool": "cache_pool#ocdbt"}
        zarr3 = ts.KvStore.open(kvstore, context=context).result().read("zarr.json").result().state == "value"
        store = ts.open({"driver": "zarr3" if zarr3 else "zarr", "kvstore": kvstore}, open=True, read=True,
                        context=context).result()
        dtype = jax.dtypes.canonicalize_dtype(target.dtype)  # int64 as int32 where JAX's x64 is off, as Orbax does
        pieces: dict = {}
        for device, index in target.sharding.addressable_devices_indices_map(target.shape).items():
            pieces.setdefault(tuple((s.start, s.stop) for s in index), []).append((device, index))
        shards = []
        for holders in pieces.values():
            value = np.asarray(store[holders[0][1]].read().result(), dtype=dtype)
            shards += [jax.device_put(value, device) for device, _ in holders]
        return jax.make_array_from_single_device_arrays(target.shape, target.sharding, shards)

    return jax.tree_util.tree_map_with_path(one, item, is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct))


def measured_text(result: dict) -> str:
    from ckptlab.tool.inspection import human

    plan = result["plan"]
    lines = [plan.text()]
    for h in range(plan.hosts):
        read = result["read"][h]
        lines.append(f"host {h} measured: read {human(read) if read is not None else 'not counted'} "
                     f"(plan: {human(plan.total('floor')[h])} to {human(plan.total('ceiling')[h])}, plus metadata); "
                     f"peak {human(result['peak'][h])} above its start, its devices hold {human(result['held'][h])} "
                     f"(plan: {human(plan.total('held')[h])})")
    if result.get("counted", "").startswith("TensorStore"):
        lines.append(f"read: {result['counted']}, restored with TensorStore shard by shard as Orbax reads underneath "
                     "(Orbax 0.12.8 cannot open an s3:// array)")
    narrowed = result.get("narrowed") or {}
    if narrowed:  # the plan counts the saved dtypes; JAX without x64 holds 64-bit values in 32 bits
        lines.append("held in another dtype than saved (JAX's x64 is off), so below the plan's figure: "
                     + ", ".join(f"{p} {a} as {b}" for p, (a, b) in narrowed.items()))
    if plan.not_arrays:
        lines.append(f"not restored, not arrays: {', '.join(plan.not_arrays)}")
    return "\n".join(lines)


__all__ = ["measure_restore", "measured_text", "restore_targets", "restore_with_tensorstore", "restored_bytes"]
