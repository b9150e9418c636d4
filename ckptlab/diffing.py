"""Is it the same model? Two Orbax checkpoints compared leaf by leaf, block by block.

    from ckptlab.diffing import diff_checkpoints
    report = diff_checkpoints("old/ckpt", "new/ckpt", rtol=1e-2)
    report.same            # True when nothing below was found
    print(report.text())   # or: python -m ckptlab diff old/ckpt new/ckpt --rtol 1e-2

What it reports, by each leaf's path in the tree (a leaf is its keys, level by level: ``{"x/y": a}``
and ``{"x": {"y": b}}`` are two leaves, the first printed quoted, ``"x/y"``):

- ``missing``: in ``a``, not in ``b``; ``extra``: in ``b``, not in ``a``;
- ``shape``: another shape (values not compared); ``dtype``: another dtype; ``sharding``: saved
  with another mesh or spec (the values are compared all the same: a re-shard keeps them);
- ``values``: leaves whose values differ, each with how many elements differ and the largest
  difference found.

Exact (``rtol=0``, the default), two leaves are the same when their dtypes and bytes are: a NaN
equals itself, ``-0.0`` differs from ``0.0``, and another dtype is a difference already. With a
tolerance (for a cast), two values differ when ``|x - y| > rtol * max(|x|, |y|)``, compared in
float64; a NaN equals a NaN, an infinity only itself, and integers are compared exactly.

It reads each array with TensorStore a block at a time, along ``a``'s saved chunk grid (a block is
at most one chunk, and at most ``block_bytes``), the two checkpoints' blocks side by side and
nothing cached: it never holds both checkpoints, nor one whole array. Its memory is bounded by the
chunks a block touches (TensorStore decodes a chunk whole: one of ``a``'s, and ``b``'s that overlap
it), so it stays flat in the size of the checkpoints and grows with the size of their chunks. The tree, shapes, dtypes and shardings come
from :mod:`ckptlab.inspection`, which reads the metadata only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ckptlab.inspection import ArrayInfo, CheckpointInfo, inspect_checkpoint, path_text

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
    values: dict = field(default_factory=dict)  # path -> {"elements": n differing, "max_abs": largest |x - y|}
    compared: int = 0  # leaves whose values were compared
    not_arrays: list = field(default_factory=list)  # leaves that are not arrays in either (not compared)

    @property
    def same(self) -> bool:
        """Nothing missing, extra, reshaped, recast or changed (another sharding alone keeps a model the same)."""
        return not (self.missing or self.extra or self.shape or self.values or (self.dtype and self.rtol == 0))

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "rtol": self.rtol, "same": self.same, "missing": self.missing,
                "extra": self.extra, "shape": self.shape, "dtype": self.dtype, "sharding": self.sharding,
                "values": self.values, "compared": self.compared}

    def text(self) -> str:
        lines = [f"a: {self.a}", f"b: {self.b}",
                 f"{'exactly' if self.rtol == 0 else f'within rtol {self.rtol:g}'}: {self.compared} leaves compared"]
        for label, paths in (("missing from b", self.missing), ("extra in b", self.extra),
                             ("another shape", self.shape), ("another dtype", self.dtype),
                             ("saved with another sharding", self.sharding)):
            for p in paths:
                lines.append(f"{label}: {p}")
        for p, d in self.values.items():
            lines.append(f"values differ: {p} ({d['elements']:,} element(s), largest difference {d['max_abs']:.3g})")
        lines.append("the same model" if self.same else "not the same")
        return "\n".join(lines)


def _open(info: CheckpointInfo, array: ArrayInfo):
    import tensorstore as ts

    context = ts.Context({"cache_pool": {"total_bytes_limit": 0}})
    if info.layout == "ocdbt":
        kvstore = {"driver": "ocdbt", "base": f"file://{info.path}/", "path": f"{array.storage_key}/"}
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


def _differing(x: np.ndarray, y: np.ndarray, rtol: float) -> tuple[int, float]:
    """(elements that differ, the largest |x - y| among them) for one block."""
    if rtol == 0:
        size = x.dtype.itemsize  # the same dtype: another one was reported without reading
        xb = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.size, size)
        yb = np.ascontiguousarray(y).reshape(-1).view(np.uint8).reshape(y.size, size)
        bad = np.any(xb != yb, axis=1)
    elif x.dtype.kind in "iub" and y.dtype.kind in "iub":
        bad = (x != y).reshape(-1)
    else:
        xf, yf = x.astype(np.float64).reshape(-1), y.astype(np.float64).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            both_nan = np.isnan(xf) & np.isnan(yf)
            either_inf = np.isinf(xf) | np.isinf(yf)
            close = np.abs(xf - yf) <= rtol * np.maximum(np.abs(xf), np.abs(yf))
            bad = ~(both_nan | np.where(either_inf, xf == yf, close))
    n = int(np.count_nonzero(bad))
    if not n:
        return 0, 0.0
    xs, ys = x.reshape(-1)[bad], y.reshape(-1)[bad]
    if xs.dtype.kind in "iub" and ys.dtype.kind in "iub":  # exactly, as Python integers
        gaps = np.abs(xs.astype(object) - ys.astype(object)).astype(np.float64)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            gaps = np.abs(xs.astype(np.float64) - ys.astype(np.float64))
    finite = gaps[np.isfinite(gaps)]
    return n, float(finite.max()) if finite.size else float("inf")


def diff_checkpoints(a, b, rtol: float = 0.0, block_bytes: int = BLOCK_BYTES, step_a: int | None = None,
                     step_b: int | None = None, progress=None) -> DiffReport:
    """Compare checkpoint ``b`` with checkpoint ``a`` (see the module's text). ``progress``, if given,
    is called with (leaves done, leaves in all, path) before each leaf."""
    if not (rtol >= 0 and math.isfinite(rtol)):
        raise ValueError(f"rtol must be a number at or above 0, not {rtol!r}")
    ia, ib = inspect_checkpoint(a, step_a), inspect_checkpoint(b, step_b)
    # by each leaf's keys, never its printed path alone: two leaves are never merged
    ma, mb = {x.keys: x for x in ia.arrays}, {x.keys: x for x in ib.arrays}
    oa, ob = {o.keys for o in ia.others}, {o.keys for o in ib.others}
    report = DiffReport(str(ia.path), str(ib.path), float(rtol))
    report.missing = [path_text(k) for k in sorted((ma.keys() | oa) - (mb.keys() | ob))]
    report.extra = [path_text(k) for k in sorted((mb.keys() | ob) - (ma.keys() | oa))]
    report.not_arrays = [path_text(k) for k in sorted(oa & ob)]
    common = sorted(ma.keys() & mb.keys())
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
        elements, largest = 0, 0.0
        for index in blocks(x.shape, itemsize, block_bytes, x.chunk_shape):
            n, gap = _differing(np.asarray(ta[index].read().result()), np.asarray(tb[index].read().result()), rtol)
            elements += n
            largest = max(largest, gap)
        report.compared += 1
        if elements:
            report.values[path] = {"elements": elements, "max_abs": largest}
    if progress is not None:
        progress(len(common), len(common), "")
    return report
