"""Unit 2's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

from tests.wrong_answers.unit1 import IMPORTS as UNIT1_IMPORTS

U2 = UNIT1_IMPORTS + """
import itertools
import math
"""

SHARD_SHAPE = [
    ("integer_division", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for size, e in zip(global_shape, spec):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        out.append(size // math.prod(mesh_shape[a] for a in axes))
    return tuple(out)
""", "incorrect", "not round down"),
    ("raises_without_naming_the_dimension", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for size, e in zip(global_shape, spec):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        if size % parts:
            raise ValueError("does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "should name the dimension"),
    ("raises_the_wrong_exception", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        assert size % parts == 0, f"dimension {i}"
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "Raise ValueError"),
    ("tuple_entry_uses_first_axis_only", """
def shard_shape(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        parts = 1 if e is None else mesh_shape[e if isinstance(e, str) else e[0]]
        if size % parts:
            raise ValueError(f"dimension {i} does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "product of both axis sizes"),
    ("forgets_to_pad_the_spec", """
def shard_shape(global_shape, mesh_shape, spec):
    out = []
    for i, (size, e) in enumerate(zip(global_shape, spec)):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        parts = math.prod(mesh_shape[a] for a in axes)
        if size % parts:
            raise ValueError(f"dimension {i} does not divide")
        out.append(size // parts)
    return tuple(out)
""", "incorrect", "including dimensions the spec leaves out"),
]

_DOMAIN_BODY = """
def device_index_domains(global_shape, mesh_shape, spec):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    out = {}
    for d in range(math.prod(sizes)):
        at = dict(zip(names, (int(c) for c in np.unravel_index(d, sizes, order=ORDER))))
        dom = []
        for ax, n in zip(entries, local):
            pos = 0
            for a in AXES:
                pos = pos * mesh_shape[a] + at[a]
            dom.append(WRAP((pos * n, (pos + 1) * n - STOP)))
        out[d] = WRAP(dom)
    return out
"""


def _domains(order="'C'", axes="ax", stop="0", wrap="tuple", pad=True):
    body = _DOMAIN_BODY if pad else _DOMAIN_BODY.replace(
        "spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))", "spec = tuple(spec)")
    return body.replace("ORDER", order).replace("AXES", axes).replace("STOP", stop).replace("WRAP", wrap)


DOMAINS = [
    ("column_major_devices", _domains(order="'F'"), "incorrect", "row-major"),
    ("tuple_axes_minor_first", _domains(axes="reversed(ax)"), "incorrect", "most significant"),
    ("inclusive_stop", _domains(stop="1"), "incorrect", "exclusive"),
    ("lists_not_tuples", _domains(wrap="list"), "incorrect", "must be a tuple"),
    # zip stops at the spec's end: a spec shorter than the rank loses the dimensions it leaves out
    ("domains_forget_to_pad_the_spec", _domains(pad=False), "incorrect", "including dimensions the spec leaves out"),
]

_CHUNK_BODY = """
def orbax_chunk_shape(global_shape, mesh_shape, spec, replica_parallel=True):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    used = {a for ax in entries for a in ax}
    r = math.prod(s for a, s in mesh_shape.items() if a not in used)
    if CONDITION:
        for i in ORDER:
            if local[i] % r == 0:
                local[i] //= r
                break
    return RESULT
"""


def _chunk(condition="replica_parallel and r > 1", order="range(len(local))", result="tuple(local)"):
    return _CHUNK_BODY.replace("CONDITION", condition).replace("ORDER", order).replace("RESULT", result)


CHUNK_SHAPE = [
    ("ignores_replica_parallel", _chunk(condition="False"), "incorrect", "each write 1/R"),
    ("splits_the_last_axis", _chunk(order="reversed(range(len(local)))"), "incorrect", "FIRST dimension"),
    ("splits_even_when_told_not_to", _chunk(condition="r > 1"), "incorrect", "replica_parallel=False"),
    ("returns_a_list", _chunk(result="local"), "incorrect", "must be a tuple"),
]

_FILES_BODY = """
def chunk_files(global_shape, chunk_shape, zarr_format=2):
    grid = [range(GRID) for g, c in zip(global_shape, chunk_shape)]
    idx = list(itertools.product(*grid))
    if FORMAT == 3:
        names = ["/".join(["c", *map(str, i)]) for i in idx]
    else:
        names = [".".join(map(str, i)) if i else "0" for i in idx]
    return SORT
"""


def _files(grid="-(-g // c)", fmt="zarr_format", sort="sorted(names)"):
    return _FILES_BODY.replace("GRID", grid).replace("FORMAT", fmt).replace("SORT", sort)


CHUNK_FILES = [
    ("zarr2_names_for_zarr3", _files(fmt="2"), "incorrect", "name chunks differently"),
    ("sorted_numerically", _files(sort="names"), "incorrect", "Sort the names as strings"),
    ("floor_division_grid", _files(grid="g // c"), "incorrect", "partial chunk"),
    ("returns_a_tuple", _files(sort="tuple(sorted(names))"), "incorrect", "must be a list"),
]

_BYTES_HELPERS = """
def _layout(global_shape, mesh_shape, spec):
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    local = [s // math.prod(mesh_shape[a] for a in ax) for s, ax in zip(global_shape, entries)]
    used = {a for ax in entries for a in ax}
    r = math.prod(s for a, s in mesh_shape.items() if a not in used)
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    doms = {}
    for d in range(math.prod(sizes)):
        at = dict(zip(names, (int(c) for c in np.unravel_index(d, sizes, order=ORDER))))
        key = []
        for ax in entries:
            pos = 0
            for a in ax:
                pos = pos * mesh_shape[a] + at[a]
            key.append(pos)
        doms[d] = tuple(key)
    return local, r, doms

def bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel=True):
    local, r, doms = _layout(global_shape, mesh_shape, spec)
    shard = math.prod(local) * itemsize
    split = SPLIT
    seen, out = set(), {}
    for d in sorted(doms):
        if split:
            out[d] = shard // r
        elif FULL or doms[d] not in seen:
            out[d] = shard
        else:
            out[d] = 0
        seen.add(doms[d])
    return FILTER
"""


def _bytes(order="'C'", split="replica_parallel and r > 1 and any(n % r == 0 for n in local)", full="False",
           filt="out"):
    return (_BYTES_HELPERS.replace("ORDER", order).replace("SPLIT", split).replace("FULL", full)
            .replace("FILTER", filt))


BYTES_PER_DEVICE = [
    ("every_replica_writes_a_full_copy", _bytes(split="False", full="True"), "incorrect", "written once in total"),
    ("column_major_replica_zero", _bytes(order="'F'", split="False"), "incorrect", "numbered row-major over the mesh"),
    ("only_replica_zero_writes", _bytes(split="False"), "incorrect", "each writes its 1/R slice"),
    ("drops_devices_that_write_nothing", _bytes(filt="{d: b for d, b in out.items() if b}"), "incorrect",
     "entry for every device"),
    # the replicas split the shard whatever replica_parallel says
    ("writes_slices_with_replica_parallel_off", _bytes(split="r > 1 and any(n % r == 0 for n in local)"),
     "incorrect", "only replica 0 of each shard writes it"),
    # a floored 1/R share for every replica, even when no dimension is divisible by R
    ("floors_the_replica_share", _bytes(split="replica_parallel and r > 1"), "incorrect",
     "the replicas cannot share it"),
]

_HOSTS = """
def bytes_written_per_host(global_shape, itemsize, mesh_shape, spec, devices_per_host, replica_parallel=True):
    per_device = bytes_written_per_device(global_shape, itemsize, mesh_shape, spec, replica_parallel)
    hosts = {}
    n_hosts = len(per_device) // devices_per_host
    for d, b in per_device.items():
        if b or KEEP_EMPTY:
            hosts[HOST] = hosts.get(HOST, 0) + b
    return hosts
"""


def _hosts(host="d // devices_per_host", keep_empty="True", **per_device):
    return _bytes(**per_device) + _HOSTS.replace("HOST", host).replace("KEEP_EMPTY", keep_empty)


BYTES_PER_HOST = [
    ("hosts_by_modulo", _hosts(host="d % n_hosts"), "incorrect", "consecutive"),
    ("drops_hosts_that_write_nothing", _hosts(keep_empty="False"), "incorrect", "including hosts that write nothing"),
    ("every_replica_writes", _hosts(split="False", full="True"), "incorrect", "written once in total"),
    ("only_replica_zero_writes", _hosts(split="False"), "incorrect", "each writes its 1/R slice"),
    ("hosts_write_slices_with_replica_parallel_off", _hosts(split="r > 1 and any(n % r == 0 for n in local)"),
     "incorrect", "only replica 0 of each shard writes it"),
]

WRONG = {
    "shard_shape": SHARD_SHAPE,
    "device_index_domains": DOMAINS,
    "orbax_chunk_shape": CHUNK_SHAPE,
    "chunk_files": CHUNK_FILES,
    "bytes_written_per_device": BYTES_PER_DEVICE,
    "bytes_written_per_host": BYTES_PER_HOST,
}


IMPORTS = U2  # what these answers run with
