"""Unit 4 references against the real thing: Orbax's own byte-run and coalescing helpers, the
safetensors package's parser and slicing, Orbax's sharded safetensors loader on 16 devices, the
bytes the kernel counts, and what TensorStore reads from each pre-sharded layout."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from jax.sharding import NamedSharding, PartitionSpec as P
from safetensors import SafetensorError, safe_open

from autograder import registry
from autograder.engine.cases import hidden_cases
from autograder.wall import files
from autograder.wall.kinds import CORRUPT, TRUNCATED, SafetensorsArg
from ckptlab.adapters.orbax_internals import index_domain_to_byte_runs as orbax_byte_runs, partition_runs
from ckptlab.layout import course_mesh, real_index_domains
from ckptlab.readcount import count_reads
from solutions import unit4
from tests.solutions.test_restore_real import _reads as tensorstore_reads

LEARNERS = ("ada", "grace")


def _cases(pid):
    return [c for learner in LEARNERS for c in hidden_cases(registry.get(pid), learner)[1]]


def _orbax_coalesce(runs, max_gap):
    return [(b.start, b.end - b.start) for b in partition_runs(runs, 1.0, max_gap)]


def test_byte_runs_equal_orbax_on_every_hidden_case():
    cases = _cases("4.2")
    assert {c.category for c in cases} >= {"scalar", "inner_dim", "three_d", "four_d", "one_byte"}
    for c in cases:
        bounds, shape, itemsize, base = c.args
        assert unit4.index_domain_to_byte_runs(bounds, shape, itemsize, base) == \
            orbax_byte_runs(bounds, shape, itemsize, base), c


@st.composite
def _domains(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=0, max_size=4)))
    bounds = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        bounds.append((start, draw(st.integers(start + 1, n))))
    return tuple(bounds), shape, draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(0, 10_000))


@settings(max_examples=300, deadline=None)
@given(_domains(), st.integers(0, 300))
def test_byte_runs_and_coalescing_equal_orbax_on_any_domain(domain, max_gap):
    bounds, shape, itemsize, base = domain
    runs = unit4.index_domain_to_byte_runs(bounds, shape, itemsize, base)
    assert runs == orbax_byte_runs(bounds, shape, itemsize, base)
    # Orbax's partitioner with no over-read ratio is our coalescing, for non-overlapping runs.
    assert unit4.coalesce_runs(runs, max_gap) == _orbax_coalesce(runs, max_gap)
    # The runs are exactly the shard's bytes, in order.
    assert sum(n for _, n in runs) == math.prod(b - a for a, b in bounds) * itemsize


def test_coalescing_equals_orbax_on_hidden_cases_without_overlaps():
    checked = 0
    for c in _cases("4.3"):
        runs, max_gap = c.args
        ordered = sorted(runs)
        if any(o2 < o1 + n1 for (o1, n1), (o2, _) in zip(ordered, ordered[1:])):
            continue  # overlapping runs: Orbax's ratio test counts overlap twice, ours needs no ratio
        assert unit4.coalesce_runs(runs, max_gap) == _orbax_coalesce(runs, max_gap), c
        checked += 1
    assert checked >= 10


def _header_files(tmp_path):
    out = []
    for c in _cases("4.1"):
        out.append((c, files.realize(c.args, str(tmp_path))[0]))
    return out


def test_headers_agree_with_the_safetensors_package(tmp_path):
    intact = 0
    for case, path in _header_files(tmp_path):
        arg = case.args[0]
        if arg.damage:
            continue
        header, data_start = unit4.parse_safetensors_header(path)
        with safe_open(path, "np") as f:
            assert sorted(header) == sorted(f.keys())
            for name, info in header.items():
                sl = f.get_slice(name)
                assert info["shape"] == list(sl.get_shape()) and info["dtype"] == sl.get_dtype()
                begin, end = info["data_offsets"]
                with open(path, "rb") as raw:
                    raw.seek(data_start + begin)
                    data = raw.read(end - begin)
                dtype = unit4.SAFETENSORS_DTYPES[info["dtype"]]
                np.testing.assert_array_equal(np.frombuffer(data, dtype).reshape(info["shape"]), f.get_tensor(name))
            assert (f.metadata() or {}) == dict(arg.metadata)
        intact += 1
    assert intact >= 8


def test_damaged_files_are_rejected_by_the_library_and_by_the_reference(tmp_path):
    damages = set()
    for case, path in _header_files(tmp_path):
        arg = case.args[0]
        if not arg.damage:
            continue
        with pytest.raises(SafetensorError):
            with safe_open(path, "np") as f:
                f.keys()
        word = "truncated" if arg.damage in TRUNCATED else "corrupt"
        with pytest.raises(ValueError, match=word):
            unit4.parse_safetensors_header(path)
        damages.add(arg.damage)
    assert damages == set(TRUNCATED) | set(CORRUPT)


def test_read_shard_equals_the_library_and_reads_exactly_header_and_shard(tmp_path):
    for c in _cases("4.4"):
        path, name, bounds = files.realize(c.args, str(tmp_path))
        with count_reads() as reads:
            got = unit4.read_shard(path, name, bounds)
        with safe_open(path, "np") as f:
            want = f.get_slice(name)[tuple(slice(a, b) for a, b in bounds)] if bounds else f.get_tensor(name)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), c
        header_size = c.args[0].header_size()
        assert reads.bytes == 8 + header_size + got.nbytes, c


def test_orbax_sharded_safetensors_load_gives_every_device_what_read_shard_reads(tmp_path):
    import orbax.checkpoint.experimental.v1 as ocp1

    arg = SafetensorsArg((("embed", (64, 32), "float32"), ("wi", (16, 8, 32), "float16"), ("scale", (32,), "int8")), 7)
    path = files.realize(arg, str(tmp_path))
    mesh = course_mesh({"x": 4, "y": 4})
    specs = {"embed": P(None, ("x", "y")), "wi": P("x", None, "y"), "scale": P()}
    abstract = {name: jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype), sharding=NamedSharding(mesh, specs[name]))
                for name, shape, dtype in arg.tensors}
    ctx = ocp1.Context()
    ctx.checkpoint_layout = "safetensors"
    with ctx:
        loaded = ocp1.load(path, abstract)
    for name, arr in loaded.items():
        assert arr.sharding.is_equivalent_to(abstract[name].sharding, arr.ndim)
        for shard in arr.addressable_shards:
            bounds = tuple(sl.indices(n)[:2] for sl, n in zip(shard.index, arr.shape))
            np.testing.assert_array_equal(np.asarray(shard.data), unit4.read_shard(path, name, bounds))


def test_presharding_reads_equal_what_tensorstore_reads(tmp_path):
    import tensorstore as ts

    checked = 0
    for i, c in enumerate(_cases("4.5")):
        shape, itemsize, mesh_shape, spec, candidates, per_host = c.args
        best, reads = unit4.best_presharding(shape, itemsize, mesh_shape, spec, candidates, per_host)
        domains = real_index_domains(shape, mesh_shape, spec)
        hosts = {}
        for d, dom in domains.items():
            hosts.setdefault(d // per_host, {})[d] = dom
        measured = {}
        for j, (name, chunk) in enumerate(candidates.items()):
            path = tmp_path / f"c{i}-{j}"
            meta = {"shape": list(shape), "chunks": list(chunk), "dtype": {2: "<f2", 4: "<f4"}[itemsize],
                    "compressor": None}
            arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}, "metadata": meta},
                          create=True).result()
            arr.write(np.ones(shape, arr.dtype.numpy_dtype)).result()
            # each host: one store, with a cache its devices share (a chunk read once per host)
            measured[name] = sum(b for mine in hosts.values()
                                 for _, b in tensorstore_reads(path, shape, chunk, mine, 2**30).values())
        assert reads == measured, c
        assert reads[best] == min(measured.values())
        checked += 1
    assert checked >= 10


def test_the_public_examples_files_are_what_the_statements_say(tmp_path):
    p = registry.get("4.1")
    path = files.realize(p.examples[0].args, str(tmp_path))[0]
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        assert json.loads(f.read(n))["__metadata__"] == {"format": "np"}
    assert n % 8 == 0 and n + 8 == p.examples[0].expected[1]
