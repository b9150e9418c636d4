"""Property tests: the Unit 2 references agree with JAX on random meshes, specs and shapes."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st
from jax.sharding import NamedSharding, PartitionSpec as P

from ckptlab.layout import course_mesh
from solutions import unit2

MESHES = [{"x": 16}, {"x": 8}, {"x": 4, "y": 4}, {"x": 2, "y": 8}, {"a": 2, "b": 2, "c": 4}, {"x": 4, "y": 2}]


@st.composite
def layouts(draw):
    mesh = draw(st.sampled_from(MESHES))
    ndim = draw(st.integers(0, 3))
    unused = list(mesh)
    spec = []
    for _ in range(draw(st.integers(0, ndim))):
        k = draw(st.integers(0, min(2, len(unused))))
        axes = tuple(unused[:k])
        unused = unused[k:]
        spec.append(None if not axes else axes[0] if len(axes) == 1 and draw(st.booleans()) else axes)
    entries = [() if e is None else (e,) if isinstance(e, str) else e for e in spec] + [()] * (ndim - len(spec))
    shape = tuple(math.prod(mesh[a] for a in axes) * draw(st.integers(1, 3)) + draw(st.sampled_from([0, 0, 1]))
                  for axes in entries)
    return mesh, tuple(spec), shape


def _sharding(mesh_shape, spec):
    return NamedSharding(course_mesh(mesh_shape), P(*spec))


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_shard_shape_and_domains_agree_with_jax(layout):
    mesh_shape, spec, shape = layout
    sharding = _sharding(mesh_shape, spec)
    try:
        want = sharding.shard_shape(shape)
    except ValueError:
        try:
            unit2.shard_shape(shape, mesh_shape, spec)
        except ValueError:
            return
        raise AssertionError("the reference accepted a layout JAX rejects") from None
    assert unit2.shard_shape(shape, mesh_shape, spec) == tuple(want)
    real = sharding.devices_indices_map(shape)
    assert unit2.device_index_domains(shape, mesh_shape, spec) == {
        d.id: tuple(sl.indices(n)[:2] for sl, n in zip(index, shape)) for d, index in real.items()}


@settings(max_examples=150, deadline=None)
@given(layouts(), st.booleans(), st.sampled_from([1, 2, 4]))
def test_bytes_written_cover_the_array_exactly_once(layout, replica_parallel, itemsize):
    mesh_shape, spec, shape = layout
    try:
        per_device = unit2.bytes_written_per_device(shape, itemsize, mesh_shape, spec, replica_parallel)
    except ValueError:
        return
    assert sum(per_device.values()) == math.prod(shape) * itemsize
    chunk = unit2.orbax_chunk_shape(shape, mesh_shape, spec, replica_parallel)
    files = unit2.chunk_files(shape, chunk)
    assert len(files) * math.prod(chunk) == math.prod(shape)


# The checkpoint tool's chunk arithmetic (ckptlab.layout): counts without lists, keys read once.
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(1, 9)), min_size=0, max_size=3))
def test_chunk_counts_by_arithmetic_equal_the_positions_listed(dims):
    from ckptlab.layout import chunks_overlapped, count_chunks_overlapped, grid_size

    domain = [(min(a, b), max(a, b)) for a, b, _ in dims]
    chunk = [c for _, _, c in dims]
    listed = chunks_overlapped(domain, chunk)
    assert listed == sorted(listed) and count_chunks_overlapped(domain, chunk) == len(listed)
    shape = [b for _, b in domain]
    assert grid_size(shape, chunk) == len(chunks_overlapped([(0, n) for n in shape], chunk))


_PARTS = st.sampled_from(["x", "y", "c", "0", "1", "12", "0.1", "c.0", ".zarray", "zarr.json", "w.b"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_PARTS, min_size=1, max_size=5).map("/".join), max_size=12),
       st.lists(_PARTS, min_size=1, max_size=3).map("/".join))
def test_keys_indexed_once_find_what_a_scan_per_array_finds(keys, array):
    from ckptlab.layout import chunk_index, chunk_position

    scanned = {k: chunk_position(k[len(array) + 1:]) for k in keys
               if k.startswith(array + "/") and chunk_position(k[len(array) + 1:]) is not None}
    assert chunk_index(keys).get(array, {}) == scanned
