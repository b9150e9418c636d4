"""Hidden cases for Unit 2 (sharded save layouts). Meshes have 8 devices, as in the real saves
the test-suite compares against, except where noted; itemsizes run from int8 to float32."""

from __future__ import annotations

import itertools
import math

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.returns import names_dimension
from solutions.unit2 import entries_of

MESHES_1D = ({"x": 8},)
MESHES_2D = ({"x": 4, "y": 2}, {"x": 2, "y": 4}, {"data": 2, "model": 4})
ITEMSIZES = (1, 2, 4)


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _parts(mesh, spec, ndim):
    return [math.prod(mesh[a] for a in axes) for axes in entries_of(spec, ndim)]


def _shape_for(rng, mesh, spec, ndim, lo=1, hi=5):
    """A global shape every dimension of which its shard count divides."""
    return tuple(p * int(rng.integers(lo, hi)) for p in _parts(mesh, spec, ndim))


def _sharded_1d(rng):
    mesh = _pick(rng, MESHES_1D)
    spec = _pick(rng, (("x",), (None, "x")))
    return mesh, spec, _shape_for(rng, mesh, spec, 2)


def _sharded_2d(rng):
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, ((a, b), (b, a), ((a, b), None), (None, (b, a)), ((b, a),)))
    return mesh, spec, _shape_for(rng, mesh, spec, 2)


def _partly_replicated(rng):
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, ((a, None), (None, b), (b,), (None, a)))
    return mesh, spec, _shape_for(rng, mesh, spec, 2)


def _replicated(rng):
    mesh = _pick(rng, MESHES_1D + MESHES_2D)
    spec = _pick(rng, ((), (None, None)))
    return mesh, spec, tuple(8 * int(rng.integers(1, 5)) for _ in range(2))


def _no_divisible_axis(rng):
    """Replicated shards none of whose dimensions the replica count divides."""
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, ((a,), (None, a)))
    replicas = 8 // mesh[a]
    odd = [n for n in range(1, 12) if n % replicas]
    shape = [int(_pick(rng, odd)), int(_pick(rng, odd))]
    shape[len(spec) - 1] *= mesh[a]
    return mesh, spec, tuple(shape)


def _three_d(rng):
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, ((None, a, b), (b, None), ((a, b), None, None)))
    return mesh, spec, _shape_for(rng, mesh, spec, 3, 1, 4)


def _short_spec(rng):
    """A spec of one entry for an array of rank 2 or 3: the entries it leaves out are None."""
    mesh = _pick(rng, MESHES_1D + MESHES_2D)
    names = list(mesh)
    spec = _pick(rng, ((names[0],), (tuple(names),)))
    return mesh, spec, _shape_for(rng, mesh, spec, int(rng.integers(2, 4)))


def _tuple_entry(rng):
    """An entry that is a tuple of both axes of a 2-D mesh, in either order: the first is the most
    significant."""
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, (((a, b),), ((b, a), None), (None, (a, b)), (None, (b, a))))
    return mesh, spec, _shape_for(rng, mesh, spec, 2)


def _replicas_divide(rng):
    """Partly replicated shards every dimension of which the replica count divides: with
    replica_parallel the replicas would split one, so a case with it off shows who writes."""
    mesh = _pick(rng, MESHES_2D)
    a, b = list(mesh)
    spec = _pick(rng, ((a, None), (None, b), (b,), (None, a)))
    parts = _parts(mesh, spec, 2)
    replicas = 8 // math.prod(parts)
    return mesh, spec, tuple(p * replicas * int(rng.integers(1, 3)) for p in parts)


LAYOUTS = {
    "one_axis": _sharded_1d,
    "two_axes": _sharded_2d,
    "partly_replicated": _partly_replicated,
    "replicated": _replicated,
    "no_divisible_axis": _no_divisible_axis,
    "three_d": _three_d,
}


def _layout_cases(rng, families, per=2):
    return [(family, *LAYOUTS[family](rng)) for family in families for _ in range(per)]


# ---------------------------------------------------------------------------------------------
# Models of common mistakes, used only to name the mistake in a message.

def _floor_shape(shape, mesh, spec):
    return tuple(s // p for s, p in zip(shape, _parts(mesh, spec, len(shape))))


def _domains(shape, mesh, spec, order="C", minor_first=False, inclusive=False):
    names, sizes = list(mesh), list(mesh.values())
    local = _floor_shape(shape, mesh, spec)
    out = {}
    for device in range(math.prod(sizes)):
        coords = dict(zip(names, np.unravel_index(device, sizes, order=order)))
        dom = []
        for axes, n in zip(entries_of(spec, len(shape)), local):
            pos = 0
            for ax in (reversed(axes) if minor_first else axes):
                pos = pos * mesh[ax] + int(coords[ax])
            dom.append((pos * n, (pos + 1) * n - (1 if inclusive else 0)))
        out[device] = tuple(dom)
    return out


def _per_device(shape, itemsize, mesh, spec, mode):
    """mode: 'full_copies' (every replica writes the whole shard) or 'column_major'."""
    local = _floor_shape(shape, mesh, spec)
    shard_bytes = math.prod(local) * itemsize
    if mode == "full_copies":
        return {d: shard_bytes for d in range(math.prod(mesh.values()))}
    doms = _domains(shape, mesh, spec, order="F")
    seen, out = set(), {}
    for d in sorted(doms):
        out[d] = 0 if doms[d] in seen else shard_bytes
        seen.add(doms[d])
    return out


# ---------------------------------------------------------------------------------------------
# 2.1 shard_shape

def _indivisible(rng):
    mesh = _pick(rng, MESHES_1D + MESHES_2D)
    names = list(mesh)
    spec = _pick(rng, ((names[0],), (None, names[-1]), (tuple(names),)))
    parts = _parts(mesh, spec, 2)
    shape = [p * int(rng.integers(1, 4)) for p in parts]
    bad = max(range(2), key=lambda i: parts[i])  # exactly one dimension does not divide
    shape[bad] += int(rng.integers(1, parts[bad]))
    return (tuple(shape), mesh, spec)


def _shard_shape_cases(rng):
    cases = [Case(f, (shape, mesh, spec)) for f, mesh, spec, shape in
             _layout_cases(rng, ("one_axis", "two_axes", "partly_replicated", "replicated", "three_d"))]
    cases += [Case("indivisible", _indivisible(rng)) for _ in range(3)]
    cases += [Case("short_spec", (shape, mesh, spec)) for mesh, spec, shape in (_short_spec(rng) for _ in range(2))]
    return cases + [Case("tuple_entry", (shape, mesh, spec)) for mesh, spec, shape in (_tuple_entry(rng) for _ in range(2))]


def _names_bad_dimension(args, message):
    shape, mesh, spec = args
    bad = [i for i, (s, p) in enumerate(zip(shape, _parts(mesh, spec, len(shape)))) if s % p]
    return any(names_dimension(message, i) for i in bad)


def _diagnose_shard_shape(args, actual, expected):
    shape, mesh, spec = args
    if tuple(actual) == _floor_shape(shape, mesh, spec):
        return "should_raise"
    if len(actual) != len(shape):
        return "rank"
    first_axis = [1 if not axes else mesh[axes[0]] for axes in entries_of(spec, len(shape))]
    if any(len(axes) > 1 for axes in entries_of(spec, len(shape))) and tuple(actual) == tuple(
            s // p for s, p in zip(shape, first_axis)):
        return "tuple_product"
    return None


SHARD_SHAPE = Hidden(
    generate=_shard_shape_cases,
    fixed=(Case("edge", ((), {"x": 8}, ())), Case("edge", ((16,), {"x": 8}, ("x",))),
           Case("edge", ((8, 8, 8), {"x": 2, "y": 4}, ("x",)))),
    messages={
        "should_raise": "When a dimension does not divide into equal shards you must raise ValueError, not "
                        "round down: JAX never pads, and a floored shape silently drops data.",
        "wrong_exception": "Raise ValueError (or a subclass) for a dimension that does not divide.",
        "unclear_error": "Your ValueError should name the dimension that does not divide, by its index, e.g. "
                         "'dimension 1 of size 10 is not divisible by 4'.",
        "tuple_product": "A tuple entry such as ('x', 'y') divides its dimension by the product of both axis sizes, "
                         "not by the first axis's size alone.",
        "rank": "The shard has the same rank as the array: one entry per dimension, including dimensions "
                "the spec leaves out (they are not sharded).",
        "edge": "Wrong on an edge case: a scalar (shape ()), a 1-D array, or a spec shorter than the rank.",
        "one_axis": "Wrong on a 1-D mesh: dimension i is divided by the size of the axis in spec[i].",
        "two_axes": "Wrong on a 2-D mesh: a tuple entry such as ('x', 'y') divides a dimension by the "
                    "product of both axis sizes.",
        "partly_replicated": "Wrong when the spec uses only some mesh axes: unused axes replicate, they do "
                             "not shrink the shard.",
        "replicated": "Wrong on a fully replicated array: every device holds the whole array.",
        "three_d": "Wrong on a 3-D array: pad the spec with None up to the array's rank.",
        "indivisible": "Wrong when a dimension does not divide: raise ValueError naming it.",
        "short_spec": "Wrong when the spec is shorter than the array's rank: the entries it leaves out are None, "
                      "so those dimensions are not sharded.",
        "tuple_entry": "Wrong when a spec entry is a tuple of mesh axes such as ('x', 'y'): it divides its "
                       "dimension by the product of both axis sizes.",
    },
    diagnose=_diagnose_shard_shape,
    check_raise=_names_bad_dimension,
    requirements={
        "Return, as a tuple of ints, the shape of the shard every device holds": (
            "one_axis", "two_axes", "partly_replicated", "replicated", "three_d", "short_spec"),
        "When a dimension is not divisible by the number of shards along it, raise `ValueError`": ("indivisible",),
        "with a message naming that dimension by its index, e.g. 'dimension 1 of size 10 is not divisible by 4' "
        "(JAX raises IndivisibleError, a ValueError, there too)": ("indivisible",),
        "or a tuple of axis names": ("tuple_entry", "two_axes", "three_d"),
        "may be shorter than the array's rank (missing entries are None)": ("short_spec", "one_axis", "three_d"),
    },
    on_exception="Check that spec entries may be None, a name or a tuple of names, and that spec may be "
                 "shorter than the rank.",
)


# ---------------------------------------------------------------------------------------------
# 2.2 device_index_domains

def _domain_cases(rng):
    cases = [Case(f, (shape, mesh, spec)) for f, mesh, spec, shape in
             _layout_cases(rng, ("one_axis", "two_axes", "partly_replicated", "replicated", "three_d"))]
    big = _pick(rng, ({"x": 4, "y": 4}, {"x": 16}, {"x": 2, "y": 8}))  # all 16 devices
    a = list(big)
    spec = (tuple(a),) if len(a) > 1 else (a[0],)
    cases.append(Case("sixteen", (_shape_for(rng, big, spec, 2), big, spec)))
    cases += [Case("tuple_entry", (shape, mesh, spec)) for mesh, spec, shape in (_tuple_entry(rng) for _ in range(2))]
    return cases + [Case("short_spec", (shape, mesh, spec)) for mesh, spec, shape in (_short_spec(rng) for _ in range(2))]


def _diagnose_domains(args, actual, expected):
    shape, mesh, spec = args
    if actual == _domains(shape, mesh, spec, minor_first=True) != expected:
        return "tuple_order"  # checked first: with a tuple over every axis, both mistakes look alike
    if actual == _domains(shape, mesh, spec, order="F") != expected:
        return "column_major"
    if actual == _domains(shape, mesh, spec, inclusive=True):
        return "inclusive"
    if set(actual) != set(expected):
        return "devices"
    if any(len(domain) != len(shape) for domain in actual.values()):
        return "rank"
    return None


DOMAINS = Hidden(
    generate=_domain_cases,
    fixed=(Case("edge", ((), {"x": 8}, ())), Case("edge", ((8, 3), {"x": 2, "y": 4}, ("y",)))),
    messages={
        "column_major": "Devices are numbered row-major over the mesh (np.arange(n).reshape(sizes)): the "
                        "last mesh axis varies fastest. Yours looks column-major.",
        "tuple_order": "For a tuple entry like ('x', 'y'), the first axis is the most significant: "
                       "position = coord_x * size_y + coord_y.",
        "inclusive": "stop is exclusive, like a Python slice: a shard of 4 rows starting at 0 is (0, 4).",
        "devices": "Return an entry for every device of the mesh, replicated ones included, keyed by device id.",
        "rank": "An index domain has one (start, stop) pair per dimension of the array, including dimensions the "
                "spec leaves out: they are not sharded, (0, size).",
        "edge": "Wrong on an edge case: a scalar has an empty domain () on every device.",
        "one_axis": "Wrong on a 1-D mesh.",
        "two_axes": "Wrong on a 2-D mesh with both axes used.",
        "partly_replicated": "Wrong when some mesh axes are unused: devices that differ only along them "
                             "hold the same domain.",
        "replicated": "Wrong on a fully replicated array: every domain is the whole array.",
        "three_d": "Wrong on a 3-D array.",
        "sixteen": "Wrong on a mesh of all 16 devices.",
        "tuple_entry": "Wrong when a spec entry is a tuple of both mesh axes: the first axis of the tuple is the "
                       "most significant.",
        "short_spec": "Wrong when the spec is shorter than the array's rank: the entries it leaves out are None, "
                      "so those dimensions span the whole array, (0, size).",
    },
    diagnose=_diagnose_domains,
    requirements={
        "Return a dict `{device_id: index_domain}` for every device of the mesh": ("partly_replicated", "replicated"),
        "an index domain is a tuple of `(start, stop)` per dimension (stop exclusive)": (
            "one_axis", "two_axes", "partly_replicated", "replicated", "three_d", "sixteen", "tuple_entry",
            "short_spec"),
        "Replicated devices share a domain": ("partly_replicated", "replicated"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "two_axes", "partly_replicated", "three_d", "tuple_entry"),
        "or a tuple of axis names (the first one most significant)": ("tuple_entry", "two_axes", "sixteen"),
        "may be shorter than the array's rank (missing entries are None)": (
            "short_spec", "one_axis", "partly_replicated", "sixteen"),
    },
    on_exception="Index domains are tuples of (start, stop) pairs; mesh_shape is a dict of axis sizes.",
)


# ---------------------------------------------------------------------------------------------
# 2.3 orbax_chunk_shape

def _chunk_shape_cases(rng):
    cases = []
    for f, mesh, spec, shape in _layout_cases(rng, tuple(LAYOUTS)):
        cases.append(Case(f, (shape, mesh, spec, True)))
    for _, mesh, spec, shape in _layout_cases(rng, ("replicated", "partly_replicated"), per=1):
        cases.append(Case("replica_parallel_off", (shape, mesh, spec, False)))
    mesh, spec, shape = _replicas_divide(rng)
    cases.append(Case("replica_parallel_off", (shape, mesh, spec, False)))
    return cases


def _diagnose_chunk_shape(args, actual, expected):
    shape, mesh, spec, rp = args
    local = _floor_shape(shape, mesh, spec)
    if tuple(actual) == local and local != tuple(expected):
        return "no_replica_split"
    replicas = 8 // math.prod(p for p in _parts(mesh, spec, len(shape)))
    if rp and len(local) and local[-1] % replicas == 0 and tuple(actual) == local[:-1] + (local[-1] // replicas,):
        return "last_axis"
    if not rp and tuple(actual) != local:
        return "rp_off"
    return None


CHUNK_SHAPE = Hidden(
    generate=_chunk_shape_cases,
    fixed=(Case("edge", ((), {"x": 8}, (), True)), Case("edge", ((64, 32), {"x": 8}, ("x",), True))),
    messages={
        "no_replica_split": "With replica_parallel the R replicas of a shard each write 1/R of it: the chunk is "
                            "the shard divided by R along its first divisible dimension.",
        "last_axis": "Split along the FIRST dimension divisible by the replica count, not the last.",
        "rp_off": "With replica_parallel=False one replica writes the whole shard: the chunk is the shard.",
        "edge": "Wrong on an edge case: a scalar's chunk is (), and a fully sharded array has no replicas.",
        "one_axis": "Wrong on a fully sharded array over a 1-D mesh: the chunk is the shard.",
        "two_axes": "Wrong on an array sharded over both mesh axes.",
        "partly_replicated": "Wrong when some mesh axes replicate the shard: R is the product of the unused axes.",
        "replicated": "Wrong on a fully replicated array: R is the number of devices.",
        "no_divisible_axis": "Wrong when no dimension of the shard is divisible by R: then one replica writes "
                             "the whole shard.",
        "three_d": "Wrong on a 3-D array.",
        "replica_parallel_off": "Wrong with replica_parallel=False.",
    },
    diagnose=_diagnose_chunk_shape,
    requirements={
        "Return, as a tuple, the chunk shape Orbax writes for this array": (
            "one_axis", "two_axes", "partly_replicated", "replicated", "no_divisible_axis", "three_d",
            "replica_parallel_off"),
        "A chunk is normally one shard": ("one_axis", "two_axes"),
        "the R replicas of a shard split it along its first dimension divisible by R, each writing one slice, so "
        "the chunk is that slice": ("replicated", "partly_replicated"),
        "when no dimension is divisible, or `replica_parallel=False`, one replica writes the whole shard": (
            "no_divisible_axis", "replica_parallel_off"),
    },
)


# ---------------------------------------------------------------------------------------------
# 2.4 chunk_files

def _names(shape, chunk, zarr_format, numeric_sort=False):
    grid = [range(-(-g // c)) for g, c in zip(shape, chunk)]
    idx = list(itertools.product(*grid))
    if zarr_format == 3:
        names = ["/".join(["c", *map(str, i)]) for i in idx]
    else:
        names = [".".join(map(str, i)) if i else "0" for i in idx]
    return names if numeric_sort else sorted(names)


def _chunk_files_cases(rng):
    def grid_case(zarr, lo=1, hi=5, ndim=2):
        chunk = tuple(int(rng.integers(1, 9)) for _ in range(ndim))
        shape = tuple(c * int(rng.integers(lo, hi)) for c in chunk)
        return (shape, chunk, zarr)

    cases = [Case("zarr2", grid_case(2)) for _ in range(2)] + [Case("zarr3", grid_case(3)) for _ in range(2)]
    cases += [Case("many_chunks", grid_case(int(z), 11, 14, 1 + int(rng.integers(0, 2)))) for z in (2, 3)]
    chunk = (int(rng.integers(3, 7)), int(rng.integers(3, 7)))
    shape = tuple(c * int(rng.integers(1, 4)) + int(rng.integers(1, c)) for c in chunk)
    cases.append(Case("partial_chunks", (shape, chunk, int(_pick(rng, (2, 3))))))
    cases.append(Case("three_d", grid_case(int(_pick(rng, (2, 3))), ndim=3)))
    c = int(rng.integers(2, 9))  # a 1-D array whose last chunk is partial
    cases.append(Case("partial_chunks", ((c * int(rng.integers(1, 6)) + int(rng.integers(1, c)),), (c,),
                                         int(_pick(rng, (2, 3))))))
    return cases


def _diagnose_chunk_files(args, actual, expected):
    shape, chunk, zarr_format = args
    other = 2 if zarr_format == 3 else 3
    if list(actual) == _names(shape, chunk, other):
        return "zarr_names"
    if list(actual) == _names(shape, chunk, zarr_format, numeric_sort=True) != list(expected):
        return "sorting"
    if sorted(actual) == sorted(expected):
        return "sorting"
    if len(actual) == math.prod(g // c for g, c in zip(shape, chunk)) < len(expected):
        return "partial"
    return None


CHUNK_FILES = Hidden(
    generate=_chunk_files_cases,
    fixed=(Case("edge", ((), (), 2)), Case("edge", ((), (), 3)), Case("edge", ((7,), (7,), 2))),
    messages={
        "zarr_names": "zarr 2 and zarr 3 name chunks differently: zarr 2 writes '0.1', zarr 3 writes 'c/0/1'. "
                      "Check which format you were asked for.",
        "sorting": "Sort the names as strings, as a directory listing does: '10.0' comes before '2.0'.",
        "partial": "A dimension that the chunk does not divide still gets a last, partial chunk: the grid has "
                   "ceil(global / chunk) chunks.",
        "edge": "Wrong on an edge case: a scalar is one chunk, named '0' in zarr 2 and 'c' in zarr 3.",
        "zarr2": "Wrong on zarr 2 names.",
        "zarr3": "Wrong on zarr 3 names.",
        "many_chunks": "Wrong when there are more than 10 chunks along a dimension.",
        "partial_chunks": "Wrong when the chunk does not divide the array.",
        "three_d": "Wrong on a 3-D array.",
    },
    diagnose=_diagnose_chunk_files,
    requirements={
        "Return the names of the chunk files Orbax writes inside an array's folder": (
            "zarr2", "zarr3", "many_chunks", "partial_chunks", "three_d"),
        "sorted as strings, like `sorted(os.listdir(...))`": ("many_chunks",),
        "The chunk grid has ceil(global / chunk) chunks along each dimension": ("partial_chunks",),
        "zarr 2 names a chunk by its grid indices joined with '.', e.g. '0.1'": ("zarr2",),
        "zarr 3 writes 'c/0/1'": ("zarr3",),
    },
)


# ---------------------------------------------------------------------------------------------
# 2.5 and 2.6: bytes per device and per host

def _bytes_cases(rng, host=False):
    cases = []
    for f, mesh, spec, shape in _layout_cases(rng, tuple(LAYOUTS), per=1 if host else 2):
        args = [shape, int(_pick(rng, ITEMSIZES)), mesh, spec]
        if host:
            args.append(int(_pick(rng, (1, 2, 4))))
        cases.append(Case(f, (*args, True)))
    for _, mesh, spec, shape in _layout_cases(rng, ("replicated", "partly_replicated"), per=1):
        args = [shape, int(_pick(rng, ITEMSIZES)), mesh, spec] + ([int(_pick(rng, (2, 4)))] if host else [])
        cases.append(Case("replica_parallel_off", (*args, False)))
    # Cases built for what replica_parallel=False leaves to replica 0 alone (it could split these), and
    # for 2.6, writes spread unevenly over hosts (only some devices write) and a replicated array that
    # every replica writes a slice of.
    mesh, spec, shape = _replicas_divide(rng)
    args = [shape, int(_pick(rng, ITEMSIZES)), mesh, spec] + ([int(_pick(rng, (2, 4)))] if host else [])
    cases.append(Case("replica_parallel_off", (*args, False)))
    if host:
        for _ in range(2):
            mesh, spec, shape = _replicas_divide(rng)
            cases.append(Case("uneven_writers", (shape, int(_pick(rng, ITEMSIZES)), mesh, spec,
                                                 int(_pick(rng, (2, 4))), False)))
        _, mesh, spec, shape = _layout_cases(rng, ("replicated",), per=1)[0]
        cases.append(Case("replicated", (shape, int(_pick(rng, ITEMSIZES)), mesh, spec, int(_pick(rng, (2, 4))), True)))
    return cases


def _diagnose_bytes(args, actual, expected):
    from solutions.unit2 import bytes_written_per_device

    shape, itemsize, mesh, spec, rp = args[:4] + (args[-1],)
    if sum(actual.values()) > sum(expected.values()) and actual == _per_device(shape, itemsize, mesh, spec, "full_copies"):
        return "full_copies"
    if rp and actual == bytes_written_per_device(shape, itemsize, mesh, spec, False) != expected:
        return "single_writer"
    if actual == _per_device(shape, itemsize, mesh, spec, "column_major") != expected:
        return "column_major"
    if set(actual) != set(expected):
        return "devices"
    if not rp and actual == bytes_written_per_device(shape, itemsize, mesh, spec, True) != expected:
        return "rp_off"
    replicas = math.prod(mesh.values()) // math.prod(_parts(mesh, spec, len(shape)))
    floored = math.prod(_floor_shape(shape, mesh, spec)) * itemsize // replicas
    if rp and replicas > 1 and actual == {d: floored for d in expected} != expected:
        return "floor_split"
    if sum(actual.values()) != sum(expected.values()):
        return "total"
    return None


BYTES_PER_DEVICE = Hidden(
    generate=_bytes_cases,
    fixed=(Case("edge", ((), 4, {"x": 8}, (), True)), Case("edge", ((64, 32), 1, {"x": 8}, ("x",), True))),
    messages={
        "full_copies": "Replicated data is written once in total, not once per replica: the R devices that hold "
                       "copies of one shard write it between them (each its 1/R slice with replica_parallel=True, "
                       "where a dimension of the shard divides by R), or replica 0 writes it alone.",
        "single_writer": "With replica_parallel=True the replicas share the work: each writes its 1/R slice "
                         "of the shard (when a dimension is divisible by R), not just replica 0.",
        "column_major": "Devices are numbered row-major over the mesh (np.arange(n).reshape(sizes): the last "
                        "axis varies fastest), and replica 0 of a shard is the first device holding it in that "
                        "order: that decides which devices write.",
        "devices": "Return an entry for every device of the mesh, with 0 for devices that write nothing.",
        "total": "Replicated data is written once in total: each byte of the array is written by exactly one "
                 "device (a shard's replicas split it, or replica 0 writes it whole), so the bytes over all "
                 "devices add up to the array's bytes, prod(global_shape) * itemsize.",
        "rp_off": "With replica_parallel=False the replicas do not share the work: only replica 0 of each shard "
                  "writes it, whole.",
        "floor_split": "When no dimension of the shard is divisible by R the replicas cannot share it: replica 0 "
                       "writes the whole shard, and the others nothing.",
        "edge": "Wrong on an edge case: a replicated scalar has no dimension its replicas could split, so "
                "replica 0 writes it whole and every other device writes nothing.",
        "one_axis": "Wrong on a fully sharded array over a 1-D mesh: no device holds a copy of another's shard, "
                    "so every device writes its own shard, whole (prod(shard shape) * itemsize bytes).",
        "two_axes": "Wrong on an array sharded over both mesh axes: each device holds a shard no other device "
                    "holds and writes it whole; a spec entry naming an axis divides that dimension by its size, "
                    "a tuple of axes by the product of their sizes (problem 2.1).",
        "partly_replicated": "Wrong when some mesh axes replicate the shards: devices that differ only along the "
                             "axes the spec leaves out hold copies of one shard (R is the product of those axes' "
                             "sizes), and replicated data is written once in total: each of them writes its 1/R "
                             "slice with replica_parallel=True where a dimension of the shard divides by R, "
                             "else replica 0 writes it whole.",
        "replicated": "Wrong on a fully replicated array: every device holds a copy (R is the number of devices), "
                      "and replicated data is written once in total: each device writes its 1/R slice with "
                      "replica_parallel=True where a dimension divides by R, else replica 0 writes it whole.",
        "no_divisible_axis": "Wrong when no dimension of the shard is divisible by the replica count: then "
                             "replica 0 writes the whole shard.",
        "three_d": "Wrong on a 3-D array: the rules hold in every rank; a spec shorter than the array's rank "
                   "leaves the dimensions after it unsharded (its missing entries are None).",
        "replica_parallel_off": "Wrong with replica_parallel=False: only replica 0 of each shard writes.",
    },
    diagnose=_diagnose_bytes,
    # (Not mapped: "not the lowest id". A mesh here is a dict of axis sizes, always built in id order,
    # where replica 0 is the lowest id of its group: no case can tell the two apart.)
    requirements={
        "Return `{device_id: bytes}` for every device of the mesh (0 for devices that write nothing)": (
            "no_divisible_axis", "replica_parallel_off"),
        "Replicated data is written once in total": (
            "replicated", "partly_replicated", "no_divisible_axis", "replica_parallel_off"),
        "With `replica_parallel=True`, each of the R replicas writes its slice of the shard": (
            "replicated", "partly_replicated"),
        "otherwise, or when no dimension is divisible by R, only replica 0 writes": (
            "no_divisible_axis", "replica_parallel_off"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "no_divisible_axis", "replica_parallel_off"),
    },
)


def _diagnose_hosts(args, actual, expected):
    from solutions.unit2 import bytes_written_per_device, bytes_written_per_host

    shape, itemsize, mesh, spec, per_host, rp = args
    n = math.prod(mesh.values())
    hosts = -(-n // per_host)
    if set(actual) != set(range(hosts)):
        return "hosts"
    if sum(actual.values()) > sum(expected.values()):
        return "full_copies"
    if rp and actual == bytes_written_per_host(shape, itemsize, mesh, spec, per_host, False) != expected:
        return "single_writer"
    by_modulo = {h: 0 for h in range(hosts)}
    for device, n_bytes in bytes_written_per_device(shape, itemsize, mesh, spec, rp).items():
        by_modulo[device % hosts] += n_bytes
    modulo = actual == by_modulo != expected
    sliced = not rp and actual == bytes_written_per_host(shape, itemsize, mesh, spec, per_host, True) != expected
    if modulo and sliced:
        return None  # either mistake gives this: let the other cases tell
    if modulo:
        return "grouping"
    if sliced:
        return "rp_off"
    if sum(actual.values()) == sum(expected.values()):
        return "grouping"
    return None


BYTES_PER_HOST = Hidden(
    generate=lambda rng: _bytes_cases(rng, host=True),
    fixed=(Case("edge", ((64, 32), 4, {"x": 8}, (), 8, True)), Case("edge", ((), 2, {"x": 8}, (), 2, True))),
    messages={
        "hosts": "Return an entry for every host, including hosts that write nothing: host ids run from 0 "
                 "to n_devices // devices_per_host - 1.",
        "full_copies": "Replicated data is written once in total, not once per host or per replica: a shard's "
                       "replicas split it or replica 0 writes it (problem 2.5), wherever their hosts are, and a "
                       "host's bytes are what its own devices write.",
        "grouping": "Host h holds the consecutive devices h * devices_per_host ... (h + 1) * devices_per_host - 1 "
                    "(device d is on host d // devices_per_host): the total is right, but split between hosts "
                    "another way.",
        "uneven_writers": "Wrong when only some devices write (replica_parallel=False): host h holds the consecutive "
                          "devices h * devices_per_host ... (h + 1) * devices_per_host - 1.",
        **{k: v for k, v in BYTES_PER_DEVICE.messages.items() if k not in ("devices", "full_copies")},
    },
    diagnose=_diagnose_hosts,
    requirements={
        "Devices are grouped into hosts of `devices_per_host` consecutive device ids": (
            "uneven_writers", "replica_parallel_off"),
        "Return `{host_id: bytes}` for every host": ("edge", "replica_parallel_off", "uneven_writers"),
        "the uncompressed bytes its devices write when Orbax saves the array, as in problem 2.5": (
            "replicated", "partly_replicated", "no_divisible_axis", "replica_parallel_off"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "no_divisible_axis", "replica_parallel_off", "uneven_writers"),
    },
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "shard_shape": SHARD_SHAPE,
    "device_index_domains": DOMAINS,
    "orbax_chunk_shape": CHUNK_SHAPE,
    "chunk_files": CHUNK_FILES,
    "bytes_written_per_device": BYTES_PER_DEVICE,
    "bytes_written_per_host": BYTES_PER_HOST,
}
