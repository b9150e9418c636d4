"""Unit 3 references against the real thing: what TensorStore really reads for each target
device, and what real Orbax restores onto 16 devices return or raise."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding, PartitionSpec as P

from autograder import registry
from autograder.engine.cases import hidden_cases
from autograder.wall import codec, files, kinds
from ckptlab.layout import course_mesh, real_index_domains
from solutions import unit3

LEARNERS = ("ada", "grace")


def _cases(pid):
    return [c for learner in LEARNERS for c in hidden_cases(registry.get(pid), learner)[1]]


def _reads(path, shape, chunk, domains, cache_bytes: int = 0):
    """Chunk reads and bytes read by TensorStore for each device's slice in turn, through one store
    with a cache of ``cache_bytes`` (large: the devices share every chunk one of them read, as the
    devices of one host can), or with none (0), each device alone: a store of its own each, since
    a chunk the last device read can still be in its cache while TensorStore releases it, and read
    again it costs a conditional read of no bytes (a read counted, 256 bytes missing, on a loaded
    machine)."""
    def opened():
        return ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)},
                        "context": {"cache_pool": {"total_bytes_limit": cache_bytes}}}).result()

    arr = opened()

    def counters():
        got = {m["name"]: m["values"][0]["value"] for m in ts.experimental_collect_matching_metrics(
            "/tensorstore/kvstore/file/") if m["name"].endswith(("/read", "/bytes_read"))}
        return got.get("/tensorstore/kvstore/file/read", 0), got.get("/tensorstore/kvstore/file/bytes_read", 0)

    out = {}
    for device, domain in domains.items():
        if not cache_bytes:
            arr = opened()
        before = counters()
        index = tuple(slice(a, b) for a, b in domain)
        arr[index].read().result() if index else arr.read().result()
        after = counters()
        out[device] = (after[0] - before[0], after[1] - before[1])
    return out


def test_chunk_reads_and_amplification_match_what_tensorstore_reads(tmp_path):
    cases = _cases("3.1") + _cases("3.2")
    for i, case in enumerate(cases):
        shape, chunk, mesh_shape, spec = case.args[:4]
        if not shape:
            continue  # zarr 2 has no rank-0 chunk grid to read from
        path = tmp_path / f"a{i}"
        meta = {"shape": list(shape), "chunks": list(chunk), "dtype": "<f4", "compressor": None}
        arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}, "metadata": meta},
                      create=True).result()
        arr.write(np.ones(shape, np.float32)).result()
        domains = real_index_domains(shape, mesh_shape, spec)
        reads = _reads(path, shape, chunk, domains)
        want = unit3.chunks_to_read(shape, chunk, mesh_shape, spec)
        assert {d: n for d, (n, _) in reads.items()} == {d: len(v) for d, v in want.items()}, case
        needed = sum(math.prod(b - a for a, b in dom) for dom in domains.values()) * 4
        read_bytes = sum(b for _, b in reads.values())
        # Every device reading alone, one after another, cache off: the bound with no sharing at all,
        # which 3.2 gives with one device per host.
        assert math.isclose(unit3.read_amplification(shape, chunk, mesh_shape, spec, 1), read_bytes / needed), case


@pytest.mark.slow
@pytest.mark.parametrize("ocdbt", [True, False], ids=["ocdbt", "zarr"])
def test_real_orbax_restores_read_between_the_two_bounds_of_3_2_on_one_and_two_hosts(tmp_path, ocdbt):
    """What each process really reads (the kernel's count) restoring 8 MiB saved on 8 devices onto
    16, in one process and in two joined by jax.distributed: at least 3.2's model with one host per
    process (one read per chunk per host), at most its bound with no sharing (one device per host).
    Aligned and replicated targets read exactly the model."""
    from ckptlab.restorecount import restore_reads

    shape, saved_chunk = (1024, 2048), (128, 2048)
    mesh8 = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("x",))
    values = np.random.default_rng(0).standard_normal(shape).astype(np.float32)  # incompressible
    w = jax.device_put(values, NamedSharding(mesh8, P("x")))
    path = tmp_path / "ckpt"
    with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=ocdbt)) as ckpt:
        ckpt.save(path, args=ocp.args.PyTreeSave({"w": w}))
    stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    specs = {"rows": ("x",), "columns": (None, "x"), "replicated": ()}
    slack = 256 * 1024  # metadata files
    for processes in (1, 2):
        measured = dict(zip(specs, restore_reads(path, [{"w": s} for s in specs.values()], processes=processes)))
        for name, spec in specs.items():
            # 3.2's models for each process (devices p*n .. p*n+n-1), as fractions of the stored chunks:
            # one read per chunk per host, and no sharing at all (each device its own reads)
            chunks = unit3.chunks_to_read(shape, saved_chunk, {"x": 16}, spec)
            n = 16 // processes
            for p, got in enumerate(measured[name]):
                mine = [chunks[d] for d in range(p * n, (p + 1) * n)]
                least = len({c for v in mine for c in v}) / 8 * stored
                most = sum(len(v) for v in mine) / 8 * stored
                assert least * 0.98 - slack <= got <= most + slack, (processes, name, got / stored, least / stored)
                if name == "replicated":  # one restore per process, every device's slice the same: read once
                    assert got <= least * 1.02 + slack, (processes, name, got / stored)


@pytest.mark.slow
def test_restores_return_the_saved_values_placed_as_the_target_says(tmp_path):
    for case in _cases("3.3"):
        ckpt, mesh_arg, spec_args = case.args
        path = files.realize(ckpt, str(tmp_path))
        mesh, specs = codec.materialize(mesh_arg), codec.materialize(spec_args)
        restored = unit3.restore_resharded(path, mesh, specs)
        assert restored.keys() == ckpt.values().keys()
        for name, want in ckpt.values().items():
            leaf = restored[name]
            np.testing.assert_array_equal(np.asarray(leaf), want)
            target = NamedSharding(mesh, specs[name])
            assert leaf.sharding.is_equivalent_to(target, leaf.ndim), case
            assert {d.id for d in leaf.sharding.device_set} == set(range(16))
            assert all(s.data.shape == target.shard_shape(leaf.shape) for s in leaf.addressable_shards)


def _real_error(saved_shape, target_shape, mesh_shape, spec, path):
    mesh8 = course_mesh({"x": 8})
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, {"a": jax.device_put(jnp.zeros(saved_shape), NamedSharding(mesh8, P()))})
    checkpointer.wait_until_finished()
    try:
        mesh = codec.materialize(kinds.MeshArg(tuple(mesh_shape.items())))
        target = {"a": jax.ShapeDtypeStruct(target_shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))}
        checkpointer.restore(path, target)
    except ValueError as e:
        if type(e).__name__ == "IndivisibleError":
            return "indivisible"
        if "not found in mesh" in str(e):
            return "unknown_axis"
        if "Requested shape" in str(e) or "not compatible with the stored shape" in str(e):
            return "shape_mismatch"
        raise
    return "ok"


@pytest.mark.slow
def test_restore_error_names_what_real_restores_raise(tmp_path):
    for i, case in enumerate(_cases("3.4")):
        got = unit3.restore_error(*case.args)
        assert got == _real_error(*case.args, tmp_path / f"c{i}"), case


_NO_SHARDINGS_CHILD = r"""
import json, sys
process, port, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
from ckptlab.devices import prepare_environment

prepare_environment(8)
import jax
import jax.numpy as jnp

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process, initialization_timeout=120)
import orbax.checkpoint as ocp

try:
    ocp.StandardCheckpointer().restore(path, {"w": jax.ShapeDtypeStruct((64, 32), jnp.float32)})
    print(json.dumps({"process": process, "error": None}), flush=True)
except Exception as exc:
    print(json.dumps({"process": process, "error": type(exc).__name__ + ": " + str(exc).splitlines()[0]}), flush=True)
import os
os._exit(0)  # (not JAX's shutdown at exit, which waits for the other process, blocked in a collective)
"""


@pytest.mark.slow
def test_a_target_without_shardings_restores_the_saved_layout_in_one_process_and_fails_in_two(tmp_path):
    """Lesson 3's pitfall, checked: one process silently gets the saved 8-device layout; of two
    processes, the one holding none of the saved devices raises."""
    import json
    import os
    import socket
    import subprocess
    import sys

    mesh8 = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("x",))
    w = jax.device_put(jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32), NamedSharding(mesh8, P("x")))
    path = tmp_path / "ckpt"
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, {"w": w})
    checkpointer.wait_until_finished()
    one = checkpointer.restore(path, {"w": jax.ShapeDtypeStruct((64, 32), jnp.float32)})["w"]
    assert one.sharding.num_devices == 8 and one.sharding.spec == P("x")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen([sys.executable, "-c", _NO_SHARDINGS_CHILD, str(i), str(port), str(path)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for i in range(2)]
    try:
        out, _ = procs[1].communicate(timeout=240)  # process 1 holds devices 8-15, none of the saved ones
    finally:
        for p in procs:  # process 0 waits for it in a collective until a timeout: not needed
            p.kill()
            p.wait()
    report = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    assert report["error"].startswith("ValueError: If the Array has no addressable shards"), report


@pytest.mark.slow
def test_4_5s_model_ranks_presharded_checkpoints_as_real_two_host_restores_read_them(tmp_path):
    """4.5's model against real Orbax restores by two processes (two hosts of 8 devices): for an
    FSDP target, an expert-parallel checkpoint and a pre-sharded one, each saved for real, read at
    least the model's per-host bytes and at most its no-sharing bytes, and the model's best layout
    is the one that really reads the least."""
    from ckptlab.restorecount import restore_reads
    from solutions import unit4

    shape, target = (16, 2, 256, 128), (None, None, "x")
    values = np.random.default_rng(0).standard_normal(shape).astype(np.float32)  # incompressible
    mesh16 = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    layouts = {"ep16": P("x"), "fsdp16": P(None, None, "x")}
    chunks = {name: (1, 2, 256, 128) if name == "ep16" else (16, 2, 16, 128) for name in layouts}
    best, model = unit4.best_presharding(shape, 4, {"x": 16}, target, chunks, 8)
    _, no_sharing = unit4.best_presharding(shape, 4, {"x": 16}, target, chunks, 1)
    measured = {}
    for name, spec in layouts.items():
        path = tmp_path / name
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(path, {"w": jax.device_put(values, NamedSharding(mesh16, spec))})
        checkpointer.wait_until_finished()
        (per_process,) = restore_reads(path, [{"w": target}], processes=2)
        measured[name] = sum(per_process)
        stored = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        scale = stored / values.nbytes  # the stored bytes per byte of the array (headers, metadata)
        assert model[name] * 0.98 - 2**18 <= measured[name] / scale <= no_sharing[name] + 2**18, (name, measured)
    assert min(measured, key=measured.get) == best == "fsdp16"
