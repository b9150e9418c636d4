"""Unit 2 references against the real thing, for every hidden-case family: JAX's sharding APIs,
real Orbax saves on 8 of the 16 simulated devices (chunk shapes, chunk files, bytes on disk),
Orbax's own replica-slice helper (who writes what), and TensorStore's zarr chunk naming."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding, PartitionSpec as P

from autograder import registry
from autograder.engine.cases import hidden_cases
from autograder.wall.returns import Raises
from ckptlab.adapters.orbax_internals import replica_slices
from ckptlab.layout import course_mesh
from solutions import unit2

LEARNERS = ("ada", "grace")
DTYPES = {1: jnp.int8, 2: jnp.bfloat16, 4: jnp.float32}


def _cases(pid):
    out = []
    for learner in LEARNERS:
        _, cases = hidden_cases(registry.get(pid), learner)
        out += cases
    return out


def _sharding(mesh_shape, spec):
    return NamedSharding(course_mesh(mesh_shape), P(*spec))


def test_shard_shape_matches_named_sharding_on_every_hidden_case():
    for case in _cases("2.1"):
        shape, mesh_shape, spec = case.args
        sharding = _sharding(mesh_shape, spec)
        try:
            want = sharding.shard_shape(shape)
        except ValueError:  # IndivisibleError is a ValueError
            with pytest.raises(ValueError, match=r"dimension \d+"):
                unit2.shard_shape(shape, mesh_shape, spec)
            assert case.category in ("indivisible", "public")
            continue
        assert unit2.shard_shape(shape, mesh_shape, spec) == tuple(want), case


def test_index_domains_match_devices_indices_map_on_every_hidden_case():
    for case in _cases("2.2"):
        shape, mesh_shape, spec = case.args
        real = _sharding(mesh_shape, spec).devices_indices_map(shape)
        want = {d.id: tuple(sl.indices(n)[:2] for sl, n in zip(index, shape)) for d, index in real.items()}
        assert unit2.device_index_domains(shape, mesh_shape, spec) == want, case


def _save(tree, path, zarr3, replica_parallel):
    handlers = ocp.type_handlers.create_type_handler_registry(
        (jax.Array, ocp.type_handlers.ArrayHandler(use_replica_parallel=replica_parallel)))
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=zarr3, use_compression=False,
                                          type_handler_registry=handlers)
    with ocp.Checkpointer(handler) as ckpt:
        ckpt.save(path, args=ocp.args.PyTreeSave(tree))


def _files(folder):
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), folder)
            if rel not in (".zarray", "zarr.json"):
                out[rel] = os.path.getsize(os.path.join(root, name))
    return out


def _orbax_bytes_per_device(arr, replica_parallel):
    """Who writes what, according to Orbax's own replica-slice logic."""
    got = defaultdict(int)
    for rs in replica_slices(arr, replica_parallel).replica_slices:
        (device,) = rs.unsliced_data.devices()
        shape = list(rs.unsliced_data.shape)
        if rs.slice_args is not None:
            shape[rs.slice_args.axis] = rs.slice_args.limit_index - rs.slice_args.start_index
        got[device.id] += math.prod(shape) * arr.dtype.itemsize
    return dict(got)


@pytest.mark.slow
@pytest.mark.parametrize("zarr3", [False, True], ids=["zarr2", "zarr3"])
def test_chunks_files_and_bytes_match_real_orbax_saves(tmp_path, zarr3):
    groups = defaultdict(list)  # one real save per (mesh, replica_parallel)
    for pid in ("2.3", "2.5", "2.6"):
        for case in _cases(pid):
            if pid == "2.3":
                shape, mesh_shape, spec, rp = case.args
                itemsize = 4
            else:
                shape, itemsize, mesh_shape, spec = case.args[:4]
                rp = case.args[-1]
            groups[(tuple(mesh_shape.items()), rp)].append((pid, case, shape, itemsize, mesh_shape, spec))
    checked = set()
    for g, ((_, rp), items) in enumerate(groups.items()):
        tree = {}
        for i, (_, _, shape, itemsize, mesh_shape, spec) in enumerate(items):
            values = jnp.arange(1, math.prod(shape) + 1, dtype=jnp.float32).reshape(shape).astype(DTYPES[itemsize])
            tree[f"a{i}"] = jax.device_put(values, _sharding(mesh_shape, spec))
        path = tmp_path / f"save{g}"
        _save(tree, path, zarr3, rp)
        for i, (pid, case, shape, itemsize, mesh_shape, spec) in enumerate(items):
            leaf = path / f"a{i}"
            meta = json.loads((leaf / ("zarr.json" if zarr3 else ".zarray")).read_text())
            chunk = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"] if zarr3 else (meta["chunks"] or ()))
            files = _files(leaf)
            assert unit2.orbax_chunk_shape(shape, mesh_shape, spec, rp) == chunk, case
            assert unit2.chunk_files(shape, chunk, 3 if zarr3 else 2) == sorted(files), case
            per_device = unit2.bytes_written_per_device(shape, itemsize, mesh_shape, spec, rp)
            if not zarr3:  # uncompressed zarr 2 chunk files hold exactly the data
                assert sum(files.values()) == math.prod(shape) * itemsize == sum(per_device.values()), case
            orbax = _orbax_bytes_per_device(tree[f"a{i}"], rp)
            assert {d: b for d, b in per_device.items() if b} == orbax, case
            for per_host in (1, 2, 4):
                hosts = unit2.bytes_written_per_host(shape, itemsize, mesh_shape, spec, per_host, rp)
                want = defaultdict(int, {h: 0 for h in range(8 // per_host)})
                for d, b in orbax.items():
                    want[d // per_host] += b
                assert hosts == dict(want), case
            checked.add((pid, case.category))
    for pid in ("2.3", "2.5", "2.6"):  # every hidden-case family met a real save
        assert {c.category for c in _cases(pid)} <= {c for p, c in checked if p == pid}, pid


@pytest.mark.parametrize("zarr3", [False, True], ids=["zarr2", "zarr3"])
def test_chunk_file_names_match_tensorstore_for_every_hidden_case(tmp_path, zarr3):
    for i, case in enumerate(_cases("2.4")):
        shape, chunk, fmt = case.args
        if (fmt == 3) != zarr3:
            continue
        path = tmp_path / f"arr{i}"
        spec = {"driver": "zarr3" if zarr3 else "zarr", "kvstore": {"driver": "file", "path": str(path)}}
        if zarr3:
            meta = {"shape": list(shape), "data_type": "uint8",
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk)}}}
        else:
            meta = {"shape": list(shape), "chunks": list(chunk), "dtype": "|u1", "compressor": None}
        arr = ts.open({**spec, "metadata": meta}, create=True).result()
        arr.write(np.ones(shape, np.uint8)).result()  # chunks equal to the fill value would be skipped
        assert unit2.chunk_files(shape, chunk, fmt) == sorted(_files(path)), case


def test_public_examples_of_unit_2_agree_with_jax():
    for p in registry.PROBLEMS:
        if p.unit != 2:
            continue
        for ex in p.examples:
            if isinstance(ex.expected, Raises) and p.function == "shard_shape":
                shape, mesh_shape, spec = ex.args
                with pytest.raises(ValueError):
                    _sharding(mesh_shape, spec).shard_shape(shape)
