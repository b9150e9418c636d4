"""Unit 3's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

from tests.wrong_answers.unit2 import U2

U3 = U2 + """
import orbax.checkpoint as ocp
from jax.sharding import NamedSharding, PartitionSpec
from ckptlab.layout import real_index_domains
"""

_READS = """
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    out = {}
    for d, dom in real_index_domains(global_shape, mesh_shape, spec).items():
        ranges = [range(s // c, STOP) for (s, e), c in zip(dom, chunk_shape)]
        out[d] = WRAP
    return FILTER
"""


def _reads(stop="-(-e // c)", wrap="sorted(itertools.product(*ranges))", filt="out"):
    return _READS.replace("STOP", stop).replace("WRAP", wrap).replace("FILTER", filt)


# Index domains computed by hand: device d's coordinates on the mesh (UNRAVEL), and its shard
# along a dimension sharded over a tuple of axes, taken in AXES order (most significant first).
_BY_HAND = """
def _domains(global_shape, mesh_shape, spec):
    sizes = list(mesh_shape.values())
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    entries += [()] * (len(global_shape) - len(entries))
    out = {}
    for d in range(math.prod(sizes)):
        coords = dict(zip(mesh_shape, (int(i) for i in UNRAVEL)))
        dom = []
        for n, axes in zip(global_shape, entries):
            index, parts = 0, 1
            for a in AXES:
                index, parts = index * mesh_shape[a] + coords[a], parts * mesh_shape[a]
            dom.append((index * (n // parts), (index + 1) * (n // parts)))
        out[d] = dom
    return out


def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    out = {}
    for d, dom in _domains(global_shape, mesh_shape, spec).items():
        ranges = [range(s // c, -(-e // c)) for (s, e), c in zip(dom, chunk_shape)]
        out[d] = sorted(itertools.product(*ranges))
    return out
"""


def _by_hand(unravel="np.unravel_index(d, sizes)", axes="axes"):
    return _BY_HAND.replace("UNRAVEL", unravel).replace("AXES", axes)


CHUNKS_TO_READ = [
    ("off_by_one_at_boundaries", _reads(stop="e // c + 1"), "incorrect", "stop is exclusive"),
    ("lists_not_tuples", _reads(wrap="[list(t) for t in sorted(itertools.product(*ranges))]"), "incorrect",
     "must be a tuple"),
    ("unsorted", _reads(wrap="sorted(itertools.product(*ranges), reverse=True)"), "incorrect", "sorted list"),
    ("first_replica_only", _reads(filt="{d: v for d, v in out.items() if d % 2 == 0}"), "incorrect",
     "every device of the target mesh"),
    ("column_major_device_ids", _by_hand(unravel='np.unravel_index(d, sizes, order="F")'), "incorrect",
     "numbered row-major"),
    ("last_axis_most_significant", _by_hand(axes="reversed(axes)"), "incorrect", "the first axis is the most significant"),
]

_AMP = _reads() + """
def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    reads = chunks_to_read(global_shape, chunk_shape, mesh_shape, spec)
    doms = real_index_domains(global_shape, mesh_shape, spec)
    hosts = {}
    for d in doms:
        hosts.setdefault(HOST, []).append(d)
    need = NEED
    read = READ
    return RESULT
"""
_PER_HOST_READ = "sum(len({c for d in ds for c in reads[d]}) for ds in hosts.values()) * math.prod(chunk_shape)"
_PER_HOST_NEED = ("sum(math.prod(e - s for s, e in dom) for ds in hosts.values() "
                  "for dom in {tuple(tuple(b) for b in doms[d]) for d in ds})")


def _amp(read=_PER_HOST_READ, result="read / need", need=_PER_HOST_NEED, host="d // devices_per_host"):
    return _AMP.replace("READ", read).replace("RESULT", result).replace("NEED", need).replace("HOST", host)


AMPLIFICATION = [
    ("counts_needed_bytes", _amp(read="need"), "incorrect", "read whole"),
    ("inverted", _amp(result="need / read"), "incorrect", "upside down"),
    ("ignores_hosts", _amp(host="d"), "incorrect", "once per host"),
    ("one_read_in_all", _amp(read="len({c for v in reads.values() for c in v}) * math.prod(chunk_shape)"),
     "incorrect", "reads for itself"),
    ("needs_each_replica", _amp(need="sum(math.prod(e - s for s, e in dom) for dom in doms.values())"),
     "incorrect", "needed once"),
    ("integer_division", _amp(result="read // need"), "incorrect", "must be a float"),
    ("last_axis_most_significant", _by_hand(axes="reversed(axes)") + """
def read_amplification(global_shape, chunk_shape, mesh_shape, spec, devices_per_host):
    reads = chunks_to_read(global_shape, chunk_shape, mesh_shape, spec)
    doms = _domains(global_shape, mesh_shape, spec)
    read, need = {}, {}
    for d, dom in doms.items():
        read.setdefault(d // devices_per_host, set()).update(reads[d])
        need.setdefault(d // devices_per_host, set()).add(tuple(dom))
    total_read = sum(len(v) for v in read.values()) * math.prod(chunk_shape)
    total_need = sum(math.prod(e - s for s, e in dom) for v in need.values() for dom in v)
    return total_read / total_need
""", "incorrect", "the first axis is the most significant"),
]

RESTORE = [
    ("restores_without_a_target", """
def restore_resharded(ckpt_dir, mesh, specs):
    return ocp.StandardCheckpointer().restore(ckpt_dir)
""", "incorrect", "laid out as saved"),
    ("returns_numpy", """
def restore_resharded(ckpt_dir, mesh, specs):
    return {k: np.asarray(v) for k, v in ocp.StandardCheckpointer().restore(ckpt_dir).items()}
""", "incorrect", "instead of converting to NumPy"),
    ("abstract_mesh_target", """
def restore_resharded(ckpt_dir, mesh, specs):
    ckpt = ocp.StandardCheckpointer()
    meta = ckpt.metadata(ckpt_dir).item_metadata.tree
    target = {k: jax.ShapeDtypeStruct(meta[k].shape, meta[k].dtype,
                                      sharding=NamedSharding(mesh.abstract_mesh, s)) for k, s in specs.items()}
    return ckpt.restore(ckpt_dir, target)
""", "error", "AbstractMesh"),
    ("replicates_everything", """
def restore_resharded(ckpt_dir, mesh, specs):
    ckpt = ocp.StandardCheckpointer()
    meta = ckpt.metadata(ckpt_dir).item_metadata.tree
    target = {k: jax.ShapeDtypeStruct(meta[k].shape, meta[k].dtype, sharding=NamedSharding(mesh, PartitionSpec()))
              for k in specs}
    return ckpt.restore(ckpt_dir, target)
""", "incorrect", "shardings are not what the specs ask for"),
    ("assumes_float32", """
def restore_resharded(ckpt_dir, mesh, specs):
    ckpt = ocp.StandardCheckpointer()
    meta = ckpt.metadata(ckpt_dir).item_metadata.tree
    target = {k: jax.ShapeDtypeStruct(meta[k].shape, np.float32, sharding=NamedSharding(mesh, s)) for k, s in specs.items()}
    return ckpt.restore(ckpt_dir, target)
""", "incorrect", "another dtype than they were saved with"),
]

_ERR = """
def restore_error(saved_shape, target_shape, mesh_shape, spec):
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    if UNKNOWN and any(a not in mesh_shape for ax in entries for a in ax):
        return "unknown_axis"
    if SHAPES:
        return "shape_mismatch"
    entries += [()] * (len(target_shape) - len(entries))
    if any(n % math.prod(mesh_shape.get(a, 1) for a in ax) for n, ax in zip(target_shape, entries)):
        return INDIVISIBLE
    return "ok"
"""


def _err(unknown="True", shapes="tuple(target_shape) != tuple(saved_shape)", indivisible='"indivisible"'):
    return _ERR.replace("UNKNOWN", unknown).replace("SHAPES", shapes).replace("INDIVISIBLE", indivisible)


ERRORS = [
    ("ignores_unknown_axes", _err(unknown="False"), "incorrect", "axis the mesh lacks"),
    ("compares_sizes_not_shapes", _err(shapes="math.prod(target_shape) != math.prod(saved_shape)"), "incorrect",
     "even by rank"),
    ("names_the_exception_class", _err(indivisible='"IndivisibleError"'), "incorrect", "'indivisible'"),
    ("never_checks_shapes", _err(shapes="False"), "incorrect", "shape_mismatch"),
    ("string_entries_only", _err().replace("for ax in entries for a in ax", "for ax in spec if isinstance(ax, str) for a in (ax,)"),
     "incorrect", "axis the mesh lacks"),
    ("divides_by_each_axis_alone", _err().replace(
        "any(n % math.prod(mesh_shape.get(a, 1) for a in ax) for n, ax in zip(target_shape, entries))",
        "any(n % mesh_shape.get(a, 1) for n, ax in zip(target_shape, entries) for a in ax)"),
     "incorrect", "'indivisible'"),
]

WRONG = {
    "chunks_to_read": CHUNKS_TO_READ,
    "read_amplification": AMPLIFICATION,
    "restore_resharded": RESTORE,
    "restore_error": ERRORS,
}


IMPORTS = U3  # what these answers run with
