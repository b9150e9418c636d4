"""Is it the same model? Two Orbax checkpoints compared leaf by leaf, block by block.

    from ckptlab.tool.diffing import diff_checkpoints
    report = diff_checkpoints("old/ckpt", "new/ckpt", rtol=1e-2)
    report.same            # True when nothing below was found
    print(report.text())   # or: python -m ckptlab diff old/ckpt new/ckpt --rtol 1e-2

What it reports, by each leaf's path in the tree (a leaf is its keys, level by level: ``{"x/y": a}``
and ``{"x": {"y": b}}`` are two leaves, the first printed quoted, ``"x/y"``):

- ``missing``: in ``a``, not in ``b``; ``extra``: in ``b``, not in ``a``;
- ``kind``: an array on one side, not on the other (a string saved where an array was), with
  what each side holds;
- ``shape``: another shape (values not compared); ``dtype``: another dtype; ``sharding``: saved
  with another mesh or spec (the values are compared all the same: a re-shard keeps them);
- ``values``: leaves whose values differ: for an array, how many elements differ, the largest
  difference found, and how many are a NaN against a number, and where: the first element that
  differs in row-major order, its index and its value on each side (``first``); for a leaf that is not an array (a
  string, kept outside the arrays), its value on each side (as Orbax restores it).

Every leaf of either is in one of these, or among those compared and found the same.

Exact (``rtol=0``, the default), two leaves are the same when their dtypes and bytes are: a NaN
equals itself, ``-0.0`` differs from ``0.0``, and another dtype is a difference already. With a
tolerance (for a cast), two values differ when ``|x - y| > rtol * max(|x|, |y|)``, compared in
float64 (complex128 for complex values: ``|x - y|`` is the modulus of the difference); a NaN
equals a NaN, an infinity only itself, and integers are compared exactly.

It reads each array with TensorStore a block at a time, along ``a``'s saved chunk grid (a block is
at most one chunk, and at most ``block_bytes``), the two checkpoints' blocks side by side and
nothing cached: it never holds both checkpoints, nor one whole array. Its memory is bounded by the
chunks a block touches (TensorStore decodes a chunk whole: one of ``a``'s, and ``b``'s that overlap
it), so it stays flat in the size of the checkpoints and grows with the size of their chunks. The tree, shapes, dtypes and shardings come
from :mod:`ckptlab.tool.inspection`, which reads the metadata only.

It reads only what is stored: a chunk neither side stores a byte of holds the fill value on both
(a sparse save, or a checkpoint from elsewhere declaring far more than it holds), and is not read
where the two fill values are the same (:func:`stored_blocks`). A checkpoint declaring far more
chunks or bytes than it stores is refused, unless ``max_chunks``/``max_bytes`` (``--max-chunks``,
``--max-bytes``) accept it (:mod:`ckptlab.tool.untrusted`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ckptlab.tool import objectstore
from ckptlab.tool.inspection import ArrayInfo, CheckpointInfo, inspect_checkpoint, leaf_keys, natural_key, path_text

BLOCK_BYTES = 8 * 2**20


@dataclass
class DiffReport:
    a: str
    b: str
    rtol: float
    missing: list = field(default_factory=list)
    extra: list = field(default_factory=list)
    shape: list = field(default_factory=list)
    dtype: list = field(default_factory=list)
    sharding: list = field(default_factory=list)
    # path -> an array's {"elements": n differing, "max_abs": largest |x - y| (None: only NaNs differ),
    # "nan": n of them a NaN against a number}, or a leaf's that is not an array {"a": value, "b": value}
    values: dict = field(default_factory=dict)
    compared: int = 0  # leaves whose values were compared
    not_arrays: list = field(default_factory=list)  # leaves that are not arrays in both (compared by value)
    kind: dict = field(default_factory=dict)  # path -> {"a": what a holds, "b": what b holds}
    unread: dict = field(default_factory=dict)  # path -> why its value could not be read (not compared)
    # path -> where an array's values first differ (row-major): {"index": (i, j, ...), "a": its value in a,
    # "b": in b, each as brief text}
    first: dict = field(default_factory=dict)
    leaves: tuple = (0, 0)  # leaves in a, in b

    @property
    def same(self) -> bool:
        """Nothing missing, extra, of another kind, reshaped, recast, changed or unread (another sharding
        alone keeps a model the same)."""
        return not (self.missing or self.extra or self.kind or self.shape or self.values or self.unread
                    or (self.dtype and self.rtol == 0))

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "rtol": self.rtol, "same": self.same, "missing": self.missing,
                "extra": self.extra, "kind": self.kind, "shape": self.shape, "dtype": self.dtype,
                "sharding": self.sharding,
                "values": {p: {**_plain(d), **({"first": {**self.first[p], "index": list(self.first[p]["index"])}}
                                              if p in self.first else {})} for p, d in self.values.items()},
                "compared": self.compared, "not_arrays": self.not_arrays, "unread": self.unread,
                "leaves": {"a": self.leaves[0], "b": self.leaves[1]}}

    def text(self) -> str:
        how = "exactly" if self.rtol == 0 else f"within rtol {self.rtol:g}"
        others = len(self.not_arrays)
        lines = [f"a: {self.a}", f"b: {self.b}",
                 f"{self.leaves[0]} leaves in a, {self.leaves[1]} in b; {how}: {self.compared} leaves compared "
                 f"({self.compared - others} arrays block by block, {others} "
                 f"{'leaf' if others == 1 else 'leaves'} not an array by value)"]
        for label, paths in (("missing from b", self.missing), ("extra in b", self.extra),
                             ("another shape", self.shape), ("another dtype", self.dtype),
                             ("saved with another sharding", self.sharding)):
            for p in paths:
                lines.append(f"{label}: {p}")
        for p, d in self.kind.items():
            lines.append(f"another kind: {p} ({d['a']} in a, {d['b']} in b)")
        for p, why in self.unread.items():
            lines.append(f"not compared: {p} (its value could not be read: {why})")
        for p, d in self.values.items():
            lines.append(f"values differ: {p} ({_difference(d, self.first.get(p))})")
        lines.append("the same model" if self.same else "not the same")
        return "\n".join(lines)


def _difference(d: dict, first: dict | None = None) -> str:
    if "elements" not in d:  # a leaf that is not an array
        return f"{d['a']!r} in a, {d['b']!r} in b"
    parts = [f"{d['elements']:,} element(s)"]
    if first is not None:
        parts[0] += f", first at {first['index']}: {first['a']} in a, {first['b']} in b"
    if d["max_abs"] is not None:
        parts.append(f"largest difference {d['max_abs']:.3g}")
    if d["nan"]:
        parts.append(f"{d['nan']:,} of them a NaN against a number" if d["max_abs"] is not None else
                     "largest difference NaN: a NaN against a number")
    if d["max_abs"] is None and not d["nan"]:
        parts.append("NaNs of other bytes")
    return ", ".join(parts)


def _plain(d: dict) -> dict:
    """A difference as JSON holds it: a value that is not a string or a number by its repr."""
    return {k: v if isinstance(v, str | int | float | bool | type(None)) else repr(v) for k, v in d.items()}


def _open(info: CheckpointInfo, array: ArrayInfo):
    import tensorstore as ts

    context = ts.Context({"cache_pool": {"total_bytes_limit": 0}})
    if info.layout == "ocdbt":  # its base: a local folder, or an object store's prefix
        kvstore = {"driver": "ocdbt", "base": objectstore.kvstore(info.path), "path": f"{array.storage_key}/"}
    else:
        kvstore = {"driver": "file", "path": f"{info.path}/{array.storage_key}/"}
    # Zarr 3 (Orbax v1's default) keeps an array's header in zarr.json, zarr 2 (v0's) in .zarray.
    zarr3 = ts.KvStore.open(kvstore, context=context).result().read("zarr.json").result().state == "value"
    return ts.open({"driver": "zarr3" if zarr3 else "zarr", "kvstore": kvstore}, open=True, context=context).result()


def blocks(shape, itemsize: int, block_bytes: int = BLOCK_BYTES, chunk_shape=None):
    """Index tuples covering ``shape`` in blocks of at most ``block_bytes`` (at least one element),
    each inside one chunk of ``chunk_shape`` (the saved chunk grid: TensorStore reads and decodes a
    chunk whole, so a block across chunks would read several)."""
    shape = tuple(int(n) for n in shape)
    if not shape:
        yield ()
        return
    if chunk_shape is not None and len(chunk_shape) == len(shape) and all(int(c) > 0 for c in chunk_shape):
        for corner in np.ndindex(*[math.ceil(n / int(c)) if n else 1 for n, c in zip(shape, chunk_shape)]):
            start = [k * int(c) for k, c in zip(corner, chunk_shape)]
            extent = tuple(max(0, min(int(c), n - s)) for c, n, s in zip(chunk_shape, shape, start))
            for inner in blocks(extent, itemsize, block_bytes):
                yield tuple(slice(s + i.start, s + i.stop) for s, i in zip(start, inner))
        return
    block = list(shape)
    for i in range(len(shape)):
        inner = math.prod(block[i + 1:]) * itemsize
        if math.prod(block[i:]) * itemsize <= block_bytes:
            break
        if inner <= block_bytes:
            block[i] = max(1, block_bytes // inner)
            break
        block[i] = 1
    for corner in np.ndindex(*[math.ceil(n / b) if n else 1 for n, b in zip(shape, block)]):
        yield tuple(slice(c * b, min((c + 1) * b, n)) for c, b, n in zip(corner, block, shape))


def stored_blocks(x: ArrayInfo, y: ArrayInfo, ta, tb, itemsize: int, block_bytes: int = BLOCK_BYTES,
                  rtol: float = 0.0):
    """The :func:`blocks` of ``x`` (``a``'s array, opened as ``ta``; ``y``, ``b``'s, as ``tb``) that
    hold a chunk either side stores, in order: a chunk of ``x``'s grid that neither stores a byte of
    is left out, each side reading its fill value there (only where the two fill values are the same),
    so the blocks follow the chunks stored, not the size the records declare."""
    from ckptlab.layout import grid_size, iter_chunks_overlapped

    def present(info: ArrayInfo, chunk: tuple) -> set:  # its stored chunks' positions inside its grid
        grid = [-(-n // c) for n, c in zip(info.shape, chunk)]
        return {p for p in info.chunk_sizes if len(p) == len(grid) and all(0 <= i < g for i, g in zip(p, grid))}

    shape = tuple(int(n) for n in x.shape)
    cx, cy = (tuple(int(c) for c in (i.chunk_shape or i.shape)) for i in (x, y))
    whole = not shape or any(len(c) != len(shape) or min(c) < 1 for c in (cx, cy))
    if whole or not _same_fill(ta, tb, rtol):
        yield from blocks(shape, itemsize, block_bytes, x.chunk_shape)
        return
    px, py = present(x, cx), present(y, cy)
    if len(px) == grid_size(shape, cx) or len(py) == grid_size(shape, cy):  # every chunk stored (a save's own)
        yield from blocks(shape, itemsize, block_bytes, cx)
        return
    wanted = set(px)
    for q in py:  # b's stored chunks, on a's grid
        wanted.update(iter_chunks_overlapped([(i * k, min((i + 1) * k, n)) for i, k, n in zip(q, cy, shape)], cx))
    for corner in sorted(wanted):
        start = [k * c for k, c in zip(corner, cx)]
        extent = tuple(max(0, min(c, n - s)) for c, n, s in zip(cx, shape, start))
        for inner in blocks(extent, itemsize, block_bytes):
            yield tuple(slice(s + i.start, s + i.stop) for s, i in zip(start, inner))


def _same_fill(ta, tb, rtol: float) -> bool:
    """Whether the two arrays' fill values (what a chunk never stored reads as; zero where none is
    given) are the same, as their values are compared."""
    fills = [np.asarray(0 if t.fill_value is None else t.fill_value, dtype=t.dtype.numpy_dtype).reshape(1)
             for t in (ta, tb)]
    if rtol == 0 and fills[0].dtype != fills[1].dtype:
        return False  # exactly: another dtype differs already
    return _differing(*fills, rtol)[0] == 0


def _wide(x: np.ndarray, complex_: bool) -> np.ndarray:
    """Values as float64, or complex128 where either side is complex (float64 would drop the imaginary part)."""
    return x.astype(np.complex128 if complex_ else np.float64).reshape(-1)


def _differing(x: np.ndarray, y: np.ndarray, rtol: float) -> tuple[int, float | None, int, tuple | None]:
    """(elements that differ, the largest |x - y| among those where neither is a NaN (None if there is
    none), how many differ as a NaN against a number, and the first that differs in the block (row-major):
    (its index in the block, its value in x, in y, as text), None if none) for one block."""
    complex_ = x.dtype.kind == "c" or y.dtype.kind == "c"
    if rtol == 0:
        size = x.dtype.itemsize  # the same dtype: another one was reported without reading
        xb = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.size, size)
        yb = np.ascontiguousarray(y).reshape(-1).view(np.uint8).reshape(y.size, size)
        bad = np.any(xb != yb, axis=1)
    elif x.dtype.kind in "iub" and y.dtype.kind in "iub":
        bad = (x != y).reshape(-1)
    else:
        xf, yf = _wide(x, complex_), _wide(y, complex_)
        with np.errstate(invalid="ignore", over="ignore"):
            both_nan = np.isnan(xf) & np.isnan(yf)
            either_inf = np.isinf(xf) | np.isinf(yf)
            close = np.abs(xf - yf) <= rtol * np.maximum(np.abs(xf), np.abs(yf))
            bad = ~(both_nan | np.where(either_inf, xf == yf, close))
    n = int(np.count_nonzero(bad))
    if not n:
        return 0, 0.0, 0, None
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), x.shape))
    first = (at, *_values_at(x[at], y[at]))
    xs, ys = x.reshape(-1)[bad], y.reshape(-1)[bad]
    if xs.dtype.kind in "iub" and ys.dtype.kind in "iub":  # exactly, as Python integers
        return n, float(np.abs(xs.astype(object) - ys.astype(object)).astype(np.float64).max()), 0, first
    xf, yf = _wide(xs, complex_), _wide(ys, complex_)
    nan_x, nan_y = np.isnan(xf), np.isnan(yf)
    numbers = ~(nan_x | nan_y)  # both NaN: another payload or sign, the same value (a difference of bytes)
    with np.errstate(invalid="ignore", over="ignore"):
        gaps = np.abs(xf[numbers] - yf[numbers])
    largest = float(gaps.max()) if gaps.size else None
    return n, largest, int(np.count_nonzero(nan_x ^ nan_y)), first


def _values_at(u, v) -> tuple[str, str]:
    """Two differing elements as brief text (NumPy's shortest digits for the dtype: ``0.5``, ``-0.0``,
    ``nan``); where the texts are alike (two NaNs of other bytes), their bytes beside them."""
    a, b = str(u), str(v)
    if a == b:
        a, b = (f"{t} (0x{np.asarray(w).tobytes()[::-1].hex()})" for t, w in ((a, u), (b, v)))
    return a, b


def diff_checkpoints(a, b, rtol: float = 0.0, block_bytes: int = BLOCK_BYTES, step_a: int | None = None,
                     step_b: int | None = None, progress=None, max_chunks: int | None = None,
                     max_bytes: int | None = None) -> DiffReport:
    """Compare checkpoint ``b`` with checkpoint ``a`` (see the module's text). ``progress``, if given,
    is called with (leaves done, leaves in all, path) before each leaf. A checkpoint declaring far more
    chunks or bytes than it stores is refused unless ``max_chunks``/``max_bytes`` allow it
    (:mod:`ckptlab.tool.untrusted`)."""
    from ckptlab.tool.untrusted import check_bounded

    if not (rtol >= 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be a number at or above 0, not {rtol!r}")
    ia, ib = inspect_checkpoint(a, step_a), inspect_checkpoint(b, step_b)
    for info in (ia, ib):
        check_bounded(info, max_chunks, max_bytes)
    # by each leaf's keys, never its printed path alone: two leaves are never merged
    ma, mb = {x.keys: x for x in ia.arrays}, {x.keys: x for x in ib.arrays}
    oa, ob = {o.keys: o for o in ia.others}, {o.keys: o for o in ib.others}
    la, lb = ma.keys() | oa.keys(), mb.keys() | ob.keys()
    report = DiffReport(str(ia.path), str(ib.path), float(rtol), leaves=(len(la), len(lb)))
    report.missing = [path_text(k) for k in sorted(la - lb, key=natural_key)]  # layers_2 before layers_10
    report.extra = [path_text(k) for k in sorted(lb - la, key=natural_key)]
    for k in sorted((ma.keys() & ob.keys()) | (oa.keys() & mb.keys()), key=natural_key):
        report.kind[path_text(k)] = {"a": _what(ma.get(k) or oa[k]), "b": _what(mb.get(k) or ob[k])}
    _compare_others(ia, ib, sorted(oa.keys() & ob.keys(), key=natural_key), report)
    common = sorted(ma.keys() & mb.keys(), key=natural_key)
    for done, keys in enumerate(common):
        path = path_text(keys)
        if progress is not None:
            progress(done, len(common), path)
        x, y = ma[keys], mb[keys]
        if x.shape != y.shape:
            report.shape.append(path)
            continue
        if (x.mesh, x.spec) != (y.mesh, y.spec):
            report.sharding.append(path)
        if x.dtype != y.dtype:
            report.dtype.append(path)
            if rtol == 0:
                continue  # exactly: another dtype is a difference already
        ta, tb = _open(ia, x), _open(ib, y)
        itemsize = max(ta.dtype.numpy_dtype.itemsize, tb.dtype.numpy_dtype.itemsize)
        elements, largest, nan, first = 0, None, 0, None
        for index in stored_blocks(x, y, ta, tb, itemsize, block_bytes, rtol):
            n, gap, k, at = _differing(np.asarray(ta[index].read().result()), np.asarray(tb[index].read().result()), rtol)
            spot = at and tuple(s.start + i for s, i in zip(index, at[0]))  # in the array, not the block
            if at and (first is None or spot < first[0]):
                first = (spot, *at[1:])
            elements, nan = elements + n, nan + k
            if gap is not None and n:
                largest = gap if largest is None else max(largest, gap)
        report.compared += 1
        if elements:
            report.values[path] = {"elements": elements, "max_abs": largest, "nan": nan}
            report.first[path] = {"index": first[0], "a": first[1], "b": first[2]}
    if progress is not None:
        progress(len(common), len(common), "")
    return report


def _what(leaf) -> str:
    """What a side holds at a leaf, for a leaf of another kind on each side."""
    if isinstance(leaf, ArrayInfo):
        return f"an array {leaf.dtype} {leaf.shape}"
    return f"a {leaf.kind}" if leaf.kind == "string" else leaf.kind


def _compare_others(ia: CheckpointInfo, ib: CheckpointInfo, keys: list, report: DiffReport) -> None:
    """The leaves that are not arrays on either side, compared by the values Orbax restores."""
    if not keys:
        return
    va, vb = other_values(ia), other_values(ib)
    for k in keys:
        path = path_text(k)
        unread = [v for v in (va.get(k), vb.get(k)) if isinstance(v, _Unread)]
        if unread:
            report.unread[path] = unread[0].why
            continue
        report.not_arrays.append(path)
        report.compared += 1
        if type(va[k]) is not type(vb[k]) or va[k] != vb[k]:
            report.values[path] = {"a": va[k], "b": vb[k]}


class _Unread:
    def __init__(self, why: str):
        self.why = why


def other_values(info: CheckpointInfo) -> dict:
    """{leaf keys: value} for the leaves of ``info`` that are not arrays (strings), as Orbax restores
    them: the checkpoint restored with every array a placeholder, so no array is read."""
    import jax
    import orbax.checkpoint as ocp

    def is_array(m):
        return hasattr(m, "shape") and hasattr(m, "storage")

    def args(m):
        return ocp.PLACEHOLDER if is_array(m) else ocp.RestoreArgs(
            restore_type=str if type(m).__name__ == "StringMetadata" else None)

    tree = info.metadata
    item = jax.tree.map(lambda m: ocp.PLACEHOLDER if is_array(m) else m, tree, is_leaf=lambda x: hasattr(x, "storage"))
    restore_args = jax.tree.map(args, tree, is_leaf=lambda x: hasattr(x, "storage"))
    wanted = {o.keys for o in info.others}
    try:
        with ocp.PyTreeCheckpointer() as checkpointer:
            restored = checkpointer.restore(info.path, args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args))
    except Exception as exc:  # a handler this Orbax lacks, or a record missing: said, not compared
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return {k: _Unread(why) for k in wanted}
    found = {leaf_keys(p): v for p, v in jax.tree_util.tree_flatten_with_path(restored)[0]}
    return {k: found.get(k, _Unread("Orbax restored nothing there")) for k in wanted}
