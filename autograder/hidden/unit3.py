"""Hidden cases for Unit 3 (restore re-sharding). Saved layouts come from 8-device saves; targets
use all 16 devices."""

from __future__ import annotations

import itertools
import math

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.kinds import CheckpointArg, MeshArg, SpecArg
from ckptlab.layout import real_index_domains
from solutions.unit2 import entries_of

TARGETS_2D = ({"x": 4, "y": 4}, {"x": 2, "y": 8}, {"x": 8, "y": 2})


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _read_layouts(rng):
    """(family, global_shape, chunk_shape, mesh_shape, spec): chunks from an 8-way row save."""
    k, m = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    rows, cols = 16 * k, 16 * m
    saved_chunk = (rows // 8, cols)
    out = [
        ("same_axis", (rows, cols), saved_chunk, {"x": 16}, ("x",)),
        ("cross_axis", (rows, cols), saved_chunk, {"x": 16}, (None, "x")),
        ("replicated_target", (rows, cols), saved_chunk, {"x": 16}, ()),
    ]
    mesh = _pick(rng, TARGETS_2D)
    out.append(("two_d_target", (rows, cols), saved_chunk, mesh, ("x", "y")))
    out.append(("partly_replicated", (rows, cols), saved_chunk, mesh, (None, "y")))
    # Rows over "y" alone: devices differing only along "x" read alike; numbered row-major, they are not neighbours.
    out.append(("partly_replicated", (rows, cols), saved_chunk, mesh, ("y",)))
    # Rows over two axes at once, either first: the first axis of a tuple entry is the most significant.
    out.append(("axis_tuple", (rows, cols), saved_chunk, mesh, (("x", "y"),)))
    out.append(("axis_tuple", (rows, cols), saved_chunk, mesh, (("y", "x"),)))
    # Chunks not aligned with the target shards: 96 rows in chunks of 16, read in shards of 6.
    out.append(("unaligned", (96, cols), (16, cols), {"x": 16}, ("x",)))
    out.append(("unaligned", (48, 8 * m), (12, 8 * m), {"x": 8, "y": 2}, ("x",)))
    return out


def _read_cases(rng):
    return [Case(f, (shape, chunk, mesh, spec)) for f, shape, chunk, mesh, spec in _read_layouts(rng)]


_EDGES = (Case("edge", ((), (), {"x": 16}, ())), Case("edge", ((16,), (16,), {"x": 16}, ("x",))))


def _chunks(shape, chunk, mesh, spec, inclusive=False):
    out = {}
    for d, dom in real_index_domains(shape, mesh, spec).items():
        ranges = [range(s // c, (e // c + 1) if inclusive else -(-e // c)) for (s, e), c in zip(dom, chunk)]
        out[d] = sorted(itertools.product(*ranges))
    return out


def _column_major_ids(mesh) -> dict:
    """Each device's id numbered row-major (the course's) -> its id numbered column-major."""
    sizes = list(mesh.values())
    row, column = np.arange(math.prod(sizes)).reshape(sizes), np.arange(math.prod(sizes)).reshape(sizes[::-1]).T
    return {int(row[i]): int(column[i]) for i in np.ndindex(*sizes)}


def _diagnose_chunks(args, actual, expected):
    shape, chunk, mesh, spec = args
    if set(actual) != set(expected):
        return "devices"
    plain = {d: [tuple(c) for c in v] for d, v in actual.items()}
    if plain == _chunks(shape, chunk, mesh, spec, inclusive=True) != expected:
        return "off_by_one"
    flipped = tuple(tuple(reversed(e)) if isinstance(e, tuple) else e for e in spec)
    if flipped != tuple(spec) and plain == _chunks(shape, chunk, mesh, flipped):
        return None  # (on a square mesh a tuple's axes taken in reverse look like column-major ids: the family says it)
    if plain == {ids: expected[d] for d, ids in _column_major_ids(mesh).items()} != expected:
        return "device_order"
    if all(sorted(v) == sorted(expected[d]) for d, v in plain.items()):
        return "sorting"
    return None


_READ_MESSAGES = {
    "edge": "Wrong on an edge case: a scalar is one chunk, (), read by every device.",
    "same_axis": "Wrong when the target shards the same axis the checkpoint was chunked along.",
    "cross_axis": "Wrong when the target shards another axis than the saved chunks: every device then "
                  "touches every chunk along the saved axis.",
    "replicated_target": "Wrong on a replicated target: every device needs, and reads, the whole array.",
    "two_d_target": "Wrong on a 2-D target mesh.",
    "partly_replicated": "Wrong when the target uses only some mesh axes: devices differing only along the "
                         "others read the same chunks.",
    "axis_tuple": "Wrong when one dimension is sharded over a tuple of mesh axes: the first axis is the most "
                  "significant (along that dimension, the shard of device (x, y) for ('x', 'y') is x * size_y + y).",
    "unaligned": "Wrong when chunk boundaries do not line up with the target shards: a slice that starts or "
                 "ends inside a chunk still reads it whole.",
}

CHUNKS_TO_READ = Hidden(
    generate=_read_cases,
    fixed=_EDGES,
    messages={
        "off_by_one": "Off by one at chunk boundaries: stop is exclusive, so a slice ending exactly at a chunk "
                      "boundary does not touch the next chunk (use ceil(stop / c), not stop // c + 1).",
        "devices": "Return an entry for every device of the target mesh, keyed by device id.",
        "sorting": "Return each device's chunks as a sorted list of tuples.",
        "device_order": "Devices are numbered row-major over the mesh (np.arange(n).reshape(sizes)): the last axis "
                        "varies fastest, so devices whose ids follow each other differ along the last axis.",
        **_READ_MESSAGES,
    },
    diagnose=_diagnose_chunks,
    requirements={
        "Return `{device_id: sorted list of chunk coordinates}` for every target device": (
            "cross_axis", "replicated_target", "partly_replicated"),
        "the chunks its slice overlaps": (
            "same_axis", "cross_axis", "replicated_target", "two_d_target", "partly_replicated", "axis_tuple", "unaligned"),
        "each as a tuple of chunk-grid indices": ("edge", "same_axis", "cross_axis", "two_d_target", "unaligned"),
        "to get any byte of it, a reader reads it whole": (
            "same_axis", "cross_axis", "two_d_target", "axis_tuple", "unaligned"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "two_d_target", "partly_replicated", "axis_tuple"),
        "a tuple of axis names (the first one most significant)": ("axis_tuple",),
        "may be shorter than the array's rank (missing entries are None)": (
            "same_axis", "replicated_target", "axis_tuple", "unaligned"),
    },
    on_exception="Chunk coordinates are tuples of ints; a device's slice comes from its index domain.",
)


def _amp_cases(rng):
    """3.2: each layout of 3.1 read by hosts of 2, 4 or 8 devices (2 on tuple entries); the two bounds (one device per
    host, one host) on the cross-axis layout; the edges."""
    # (Two devices a host on a tuple entry: which axis is the most significant decides whether a host's
    # two devices share a chunk.)
    cases = [Case(f, (shape, chunk, mesh, spec, 2 if f == "axis_tuple" else _pick(rng, (2, 4, 8))))
             for f, shape, chunk, mesh, spec in _read_layouts(rng)]
    _, shape, chunk, mesh, spec = _read_layouts(rng)[1]
    return cases + [Case("per_device_bound", (shape, chunk, mesh, spec, 1)), Case("one_host", (shape, chunk, mesh, spec, 16))]


_AMP_EDGES = (Case("edge", ((), (), {"x": 16}, (), 4)), Case("edge", ((16,), (16,), {"x": 16}, ("x",), 16)))


def _amplification(shape, chunk, mesh, spec, per_host, mode=""):
    """3.2's answer, or (``mode``) a mistake's: ``inverted``; ``off_by_one``; ``per_device`` (hosts
    ignored); ``one_read_total`` (each chunk once in all); ``needed_per_device`` (a slice held by
    several devices of a host needed by each); ``axis_order`` (a tuple entry's last axis taken as the
    most significant)."""
    if mode == "axis_order":
        spec, mode = tuple(tuple(reversed(e)) if isinstance(e, tuple) else e for e in spec), ""
    reads = _chunks(shape, chunk, mesh, spec, inclusive=(mode == "off_by_one"))
    doms = real_index_domains(shape, mesh, spec)
    if mode == "per_device":
        per_host = 1
    hosts = {}
    for d in doms:
        hosts.setdefault(d // per_host, []).append(d)
    per_chunk = math.prod(chunk)
    if mode == "one_read_total":
        read = len({c for v in reads.values() for c in v}) * per_chunk
    else:
        read = sum(len({c for d in ds for c in reads[d]}) for ds in hosts.values()) * per_chunk
    if mode == "needed_per_device":
        need = sum(math.prod(e - s for s, e in dom) for dom in doms.values())
    else:
        need = sum(math.prod(e - s for s, e in dom) for ds in hosts.values()
                   for dom in {tuple(tuple(b) for b in doms[d]) for d in ds})
    return need / read if mode == "inverted" else read / need


def _diagnose_amplification(args, actual, expected):
    """Name a mistake only when exactly one model of a mistake explains this case."""
    a = float(actual)
    matches = {mode for mode in ("inverted", "per_device", "one_read_total", "needed_per_device", "off_by_one")
               if math.isclose(a, _amplification(*args, mode=mode))}
    if math.isclose(a, _amplification(*args, mode="axis_order")):
        matches.add("axis_tuple")
    if math.isclose(a, 1.0) and not math.isclose(expected, 1.0):
        matches.add("needed_bytes")
    return matches.pop() if len(matches) == 1 else None


AMPLIFICATION = Hidden(
    generate=_amp_cases,
    fixed=_AMP_EDGES,
    messages={
        "needed_bytes": "A chunk is read whole, not just the bytes a device needs: count every overlapped chunk "
                        "in full (that is where amplification comes from).",
        "inverted": "The ratio is upside down: bytes read divided by bytes needed (at least 1.0).",
        "per_device": "Count each chunk once per host: the devices of one host (device // devices_per_host) "
                      "share one read of it.",
        "one_read_total": "Each host reads for itself: a chunk that two hosts need is read by both.",
        "needed_per_device": "Needed bytes are per host too: a slice that several devices of one host hold is "
                             "needed once.",
        "off_by_one": "Off by one at chunk boundaries: a slice ending exactly at a boundary does not read the "
                      "next chunk.",
        "one_host": "Wrong with every device on one host: the host reads each chunk it needs once.",
        **_READ_MESSAGES,
        "per_device_bound": "Wrong with one device per host (devices_per_host=1): each device then reads alone "
                            "every chunk it overlaps, the bound with no sharing at all.",
    },
    diagnose=_diagnose_amplification,
    requirements={
        "device d is on host d // devices_per_host": ("same_axis", "two_d_target", "partly_replicated", "axis_tuple"),
        "Within a host, a restore reads each chunk its devices overlap once, whole": (
            "same_axis", "cross_axis", "two_d_target", "axis_tuple", "one_host"),
        "each host reads for itself": ("cross_axis", "replicated_target", "per_device_bound"),
        "Return, as a float, the bytes all hosts read divided by the bytes they need": (
            "cross_axis", "axis_tuple", "per_device_bound"),
        "each host needs every distinct slice its devices hold, once": ("replicated_target", "partly_replicated"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "two_d_target", "partly_replicated", "axis_tuple"),
        "a tuple of axis names (the first one most significant)": ("axis_tuple",),
    },
    on_exception="Return a float: read / needed, with devices grouped by host (device // devices_per_host).",
)


# ---------------------------------------------------------------------------------------------
# 3.3 restore_resharded: the grader saves a fresh checkpoint on 8 devices for every case.

def _restore_cases(rng):
    def ckpt(arrays, mesh=(("x", 8),)):
        return CheckpointArg(tuple(arrays), mesh, int(rng.integers(0, 2**31)))

    r, c = 16 * int(rng.integers(1, 4)), 16 * int(rng.integers(1, 3))
    mesh16 = MeshArg((("x", 16),))
    mesh44 = MeshArg(tuple(_pick(rng, TARGETS_2D).items()))
    return [
        Case("same_axis", (ckpt([("w", (r, c), "float32", ("x",))]), mesh16, {"w": SpecArg(("x",))})),
        Case("cross_axis", (ckpt([("w", (r, c), "float32", ("x",))]), mesh16, {"w": SpecArg((None, "x"))})),
        # bfloat16, as most checkpoints are: a target that assumes float32 gets its values cast.
        Case("two_d_mesh", (ckpt([("w", (r, c), "bfloat16", ("x", "y"))], (("x", 4), ("y", 2))), mesh44,
                            {"w": SpecArg(("x", "y"))})),
        Case("replicated", (ckpt([("w", (r, c), "float32", ("x",)), ("b", (c,), "float32", ())]), mesh16,
                            {"w": SpecArg(()), "b": SpecArg(())})),
        Case("mixed_tree", (ckpt([("embed", (r, c), "float16", (None, "x")), ("step", (16,), "int32", ()),
                                  ("scale", (c,), "float32", ("x",))]), mesh16,
                            {"embed": SpecArg(("x", None)), "step": SpecArg(("x",)), "scale": SpecArg(())})),
    ]


def _diagnose_restore(args, actual, expected):
    from autograder.wall.returns import leaves_with_paths

    a, e = dict(leaves_with_paths(actual)), dict(leaves_with_paths(expected))
    if set(a) != set(e):
        return "tree"
    if any(a[k].dtype != e[k].dtype for k in e):
        return "dtype"
    if all(np.array_equal(np.asarray(a[k]), np.asarray(e[k])) for k in e):
        placements = [a[k].placement or {} for k in e]
        if any(len(p.get("sharding", {}).get("devices", [])) == 8 for p in placements):
            return "no_target"
        return "wrong_sharding"
    return "values"


RESTORE = Hidden(
    generate=_restore_cases,
    messages={
        "no_target": "The values are right but the arrays are still laid out as saved, on 8 devices: build a "
                     "target with jax.ShapeDtypeStruct(..., sharding=NamedSharding(mesh, spec)) and restore into it.",
        "wrong_sharding": "The values are right but the shardings are not what the specs ask for: use "
                          "NamedSharding(mesh, specs[name]) for each array.",
        "dtype": "Some arrays came back in another dtype than they were saved with: take each array's dtype from the "
                 "checkpoint's metadata (Orbax casts to the target's dtype without a word).",
        "tree": "Return a dict with the same keys as the saved checkpoint (and as specs).",
        "values": "Some restored values differ from the checkpoint: restore the arrays themselves, with their "
                  "saved shapes and dtypes (read them from the checkpoint's metadata).",
        "same_axis": "Wrong when re-sharding along the saved axis.",
        "cross_axis": "Wrong when re-sharding along another axis.",
        "two_d_mesh": "Wrong on a 2-D target mesh.",
        "replicated": "Wrong on replicated targets.",
        "mixed_tree": "Wrong on a tree with several arrays of different dtypes.",
    },
    diagnose=_diagnose_restore,
    requirements={
        "Return the restored dict of jax.Arrays, each sharded as asked": (
            "same_axis", "cross_axis", "two_d_mesh", "replicated", "mixed_tree"),
        "Read the checkpoint's own metadata for shapes and dtypes": ("two_d_mesh", "mixed_tree"),
    },
    on_exception="If the error mentions AbstractMesh, the target has no real devices: build NamedSharding from "
                 "the mesh you are given, not from an abstract one. Read shapes and dtypes from "
                 "ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree.",
)


# ---------------------------------------------------------------------------------------------
# 3.4 restore_error

def _error_cases(rng):
    mesh = _pick(rng, ({"x": 16},) + TARGETS_2D)
    names = list(mesh)
    spec = (names[0],) if len(names) == 1 else (names[0], names[1])
    parts = [math.prod(mesh[a] for a in axes) for axes in entries_of(spec, len(spec))]
    shape = tuple(p * int(rng.integers(1, 4)) for p in parts) + ((int(rng.integers(2, 9)),) if len(parts) == 1 else ())
    bad_dim = int(rng.integers(0, len(parts)))
    uneven = list(shape)
    uneven[bad_dim] += 1
    other = list(shape)
    other[-1] += int(rng.integers(1, 5)) * parts[-1] if len(parts) == len(shape) else 1
    return [
        Case("ok", (shape, shape, mesh, spec)),
        Case("ok", (shape, shape, mesh, (None,) + spec[1:])),
        Case("unknown_axis", (shape, shape, mesh, (names[0], "model"))),
        Case("shape_mismatch", (shape, tuple(other), mesh, spec)),
        Case("shape_mismatch", (shape, shape[:-1], mesh, spec[: len(shape) - 1])),
        Case("indivisible", (tuple(uneven), tuple(uneven), mesh, spec)),
        # An unknown axis inside a tuple entry (the known one divides the dimension).
        Case("unknown_axis", (shape, shape, mesh, ((names[0], "data"),))),
        # A dimension each axis divides but their product does not (one axis: a tuple entry of it).
        Case("indivisible", ((8, shape[-1]), (8, shape[-1]), mesh, ((names[0], names[1]),)) if len(names) == 2
             else ((24, shape[-1]), (24, shape[-1]), mesh, ((names[0],),))),
        # Same number of elements, another shape: comparing sizes is not enough.
        Case("shape_mismatch", (shape, shape[::-1] if shape[::-1] != shape else (shape[0] * 2, shape[1] // 2),
                                mesh, ())),
    ]


ERRORS = Hidden(
    generate=_error_cases,
    fixed=(Case("edge", ((), (), {"x": 16}, ())),),
    messages={
        "ok": "A valid target was reported as an error: every dimension divisible, same shape, known axes.",
        "unknown_axis": "A spec naming an axis the mesh lacks fails first, when the sharding is built: "
                        "'unknown_axis'.",
        "shape_mismatch": "A target shape that differs from the saved shape (even by rank) is 'shape_mismatch'.",
        "indivisible": "A dimension the mesh axes do not divide is 'indivisible' (JAX's IndivisibleError).",
        "edge": "Wrong on a scalar restored replicated: that is fine, 'ok'.",
    },
    requirements={
        "Return the string naming what happens: 'ok'": ("ok", "edge"),
        "'unknown_axis' when the spec names an axis the mesh does not have": ("unknown_axis",),
        "'shape_mismatch' when the target shape differs from the saved one": ("shape_mismatch",),
        "'indivisible' when the mesh does not divide a dimension": ("indivisible",),
        "or a tuple of axis names": ("unknown_axis", "indivisible"),
    },
    on_exception="Return one of the strings 'ok', 'unknown_axis', 'shape_mismatch', 'indivisible'.",
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "chunks_to_read": CHUNKS_TO_READ,
    "read_amplification": AMPLIFICATION,
    "restore_resharded": RESTORE,
    "restore_error": ERRORS,
}
