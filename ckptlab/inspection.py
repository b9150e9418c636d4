"""What is in an Orbax checkpoint, from its metadata and its files, without reading an array.

    from ckptlab.inspection import inspect_checkpoint
    info = inspect_checkpoint("runs/ckpt")        # a pytree folder, a step, or a CheckpointManager root
    print(info.table())                           # or: python -m ckptlab inspect runs/ckpt

Per array: its path in the tree, shape, dtype, the sharding it was saved with (the mesh's axes and
sizes, the spec, how many devices), the chunk shape Orbax stored it in, how many chunks are on
disk, their bytes on disk (compressed, as stored), which writer folder holds them
(``ocdbt.process_N``: one per process that saved; chunks of at most 1 KiB sit inline in the
B+tree's nodes), and the replicas (the devices holding each
distinct shard: the mesh axes the spec does not name). Totals per writer follow.

Everything comes from the checkpoint's own records: Orbax's ``metadata()`` for the tree, shapes,
dtypes, shardings and chunk shapes, and for the bytes, the OCDBT B+tree (``tensorstore.ocdbt.dump``:
each chunk's file, offset and length, read from the tree's nodes, never from the values) or, for a
checkpoint saved without OCDBT, the chunk files' sizes. Layouts read: OCDBT and plain zarr; Orbax's
v0 (``StandardCheckpointer``, ``PyTreeCheckpointer``, ``CheckpointManager`` items such as
``default``) and v1 (``state``) folders; a ``CheckpointManager`` root (its newest committed step, or
the one asked for). A folder that is none of these, or a step still being written, is refused with
what to pass instead.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

_TMP = ".orbax-checkpoint-tmp"


class NotACheckpoint(ValueError):
    """The path is not a checkpoint this tool reads (the message says what to pass)."""


@dataclass
class ArrayInfo:
    path: str  # the leaf's path in the tree, keys joined by "/"
    shape: tuple
    dtype: str
    mesh: dict | None  # the saved mesh's axes and sizes, None for a single device or a host array
    spec: tuple | None  # the saved PartitionSpec, as entries (None, "x", ("x", "y"))
    devices: int  # devices it was saved from
    replicas: int  # devices holding each distinct shard
    chunk_shape: tuple | None
    chunks: int  # chunks on disk
    bytes_on_disk: int
    writers: dict = field(default_factory=dict)  # writer folder -> bytes on disk
    storage_key: str = ""
    chunk_sizes: dict = field(default_factory=dict, repr=False)  # chunk grid position -> bytes on disk

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape)) * _itemsize(self.dtype) if self.shape is not None else 0


@dataclass
class CheckpointInfo:
    path: Path  # the pytree folder read
    layout: str  # "ocdbt" or "zarr"
    step: int | None
    arrays: list[ArrayInfo]
    others: list[str]  # leaves that are not arrays (strings, scalars Orbax keeps in its metadata)
    pending: list[str] = field(default_factory=list)  # a manager's steps still being written (or abandoned)

    @property
    def bytes_on_disk(self) -> int:
        return sum(a.bytes_on_disk for a in self.arrays)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def per_writer(self) -> dict:
        totals: dict = {}
        for a in self.arrays:
            for writer, n in a.writers.items():
                totals[writer] = totals.get(writer, 0) + n
        return dict(sorted(totals.items()))

    def table(self) -> str:
        rows = [("array", "shape", "dtype", "saved on", "spec", "replicas", "chunk", "chunks", "on disk")]
        for a in self.arrays:
            mesh = " x ".join(f"{k} {v}" for k, v in a.mesh.items()) if a.mesh else "1 device"
            rows.append((a.path, str(a.shape), a.dtype, mesh, _spec_text(a.spec), str(a.replicas),
                         str(a.chunk_shape), str(a.chunks), human(a.bytes_on_disk)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{self.path}  ({self.layout}{'' if self.step is None else f', step {self.step}'})"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.append(f"{len(self.arrays)} arrays, {human(self.nbytes)} of values, {human(self.bytes_on_disk)} on disk")
        if self.per_writer():
            lines.append("on disk, by where: " + "; ".join(f"{w} {human(n)}" for w, n in self.per_writer().items()))
        if self.pending:
            lines.append(f"steps still being written or abandoned, not read: {', '.join(self.pending)}")
        if self.others:
            lines.append(f"not arrays: {', '.join(self.others)}")
        return "\n".join(lines)


def human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def _itemsize(dtype: str) -> int:
    import ml_dtypes  # noqa: F401  (bfloat16 and the float8 types by name)
    import numpy as np

    return np.dtype(dtype).itemsize


def _spec_text(spec) -> str:
    if spec is None:
        return "-"
    return "P(" + ", ".join(repr(e) if e is not None else "None" for e in spec) + ")"


# ------------------------------------------------------------------------------ finding the item
def _steps(root: Path) -> dict:
    return {int(p.name): p for p in root.iterdir() if p.is_dir() and p.name.isdigit()}


def locate(path, step: int | None = None) -> tuple[Path, int | None]:
    """The pytree folder to read under ``path`` and its step (None outside a manager)."""
    path = Path(path)
    if not path.exists():
        raise NotACheckpoint(f"{path} does not exist: pass an Orbax checkpoint folder")
    if not path.is_dir():
        raise NotACheckpoint(f"{path} is a file: pass the checkpoint's folder (the one holding _METADATA)")
    if _TMP in path.name:
        raise NotACheckpoint(f"{path} is a checkpoint still being written (or abandoned by a killed save): "
                             "pass a committed step")
    if (path / "_METADATA").exists():
        return path, None
    steps = _steps(path)
    if steps:
        if step is None:
            step = max(steps)
        elif step not in steps:
            raise NotACheckpoint(f"{path} has no step {step}; its steps: {sorted(steps)}")
        return locate(steps[step])[0], step
    if step is not None:
        raise NotACheckpoint(f"{path} is not a CheckpointManager root (no step folders): drop --step")
    items = sorted(p for p in path.iterdir() if p.is_dir() and (p / "_METADATA").exists())
    if len(items) == 1 and (path / "_CHECKPOINT_METADATA").exists():  # a step or a v1 folder and its one item
        match = re.fullmatch(r"\d+", path.name)
        return items[0], int(path.name) if match else None
    if len(items) > 1:
        raise NotACheckpoint(f"{path} holds several items ({', '.join(p.name for p in items)}): pass one of them")
    pending = sorted(p.name for p in path.iterdir() if _TMP in p.name)
    if pending:
        raise NotACheckpoint(f"{path} holds only steps still being written ({', '.join(pending)}): "
                             "wait for the save to commit, or pass an older step")
    raise NotACheckpoint(f"{path} is not an Orbax checkpoint: no _METADATA in it, in an item folder, or in a step "
                         "folder. Pass the folder a save wrote (or a CheckpointManager root)")


# ------------------------------------------------------------------------------ bytes on disk
def _ocdbt_sizes(item: Path) -> dict:
    """{storage key: (bytes, writer)} for every key of the item's OCDBT database, from its B+tree."""
    import tensorstore as ts

    base = ts.KvStore.open(f"file://{item}/").result()
    manifest = ts.ocdbt.dump(base).result()
    sizes: dict = {}
    if not manifest.get("versions") or "location" not in manifest["versions"][-1]["root"]:
        return sizes  # an empty database
    root = manifest["versions"][-1]["root"]

    def walk(location: str, height: int):
        node = ts.ocdbt.dump(base, location).result()
        for entry in node["entries"]:
            key = entry["key"].decode() if isinstance(entry["key"], bytes) else entry["key"]
            if node["height"] > 0:
                walk(entry["node"], node["height"] - 1)
            elif "inline_value" in entry:
                sizes[key] = (len(entry["inline_value"]), "inline in the B+tree")
            else:
                ref = entry["indirect_value"]  # "value:<base path>:<file>:<offset>:<length>"
                sizes[key] = (int(ref.rsplit(":", 1)[1]), _writer(ref))

    walk(root["location"], manifest["versions"][-1].get("root_height", 0))
    return sizes


def _writer(reference: str) -> str:
    match = re.search(r"(ocdbt\.process_\d+)", reference)
    return match.group(1) if match else "the checkpoint's own folder"


def _zarr_sizes(item: Path, key: str) -> dict:
    folder = item / key
    if not folder.is_dir():
        return {}
    return {f"{key}/{p.relative_to(folder)}": (p.stat().st_size, "the array's folder")
            for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".") and p.name != "zarr.json"}


# ------------------------------------------------------------------------------ the whole
def inspect_checkpoint(path, step: int | None = None) -> CheckpointInfo:
    """What the checkpoint at ``path`` holds, array by array (see the module's text)."""
    import jax
    import orbax.checkpoint as ocp

    item, step = locate(path, step)
    try:
        tree = ocp.StandardCheckpointer().metadata(item).item_metadata.tree
    except Exception as exc:  # a folder with _METADATA Orbax cannot read
        raise NotACheckpoint(f"{item}: Orbax could not read its metadata ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from exc
    ocdbt = (item / "manifest.ocdbt").exists()
    sizes = _ocdbt_sizes(item) if ocdbt else {}
    arrays, others = [], []
    leaves = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: hasattr(x, "storage"))[0]
    for keypath, meta in leaves:
        name = "/".join(_key(e) for e in keypath)
        if not hasattr(meta, "shape") or not hasattr(meta, "storage"):
            others.append(name)
            continue
        key = getattr(meta, "name", None) or ".".join(_key(e) for e in keypath)
        chunks = {k: v for k, v in (sizes.items() if ocdbt else _zarr_sizes(item, key).items())
                  if k.startswith(key + "/") and not k.rsplit("/", 1)[1].startswith(".") and not k.endswith("zarr.json")}
        writers: dict = {}
        for n, writer in chunks.values():
            writers[writer] = writers.get(writer, 0) + n
        grid = {}
        for k, (n, _) in chunks.items():
            position = _grid_position(k[len(key) + 1:])
            if position is not None:
                grid[position[: len(meta.shape)]] = n  # a scalar's one chunk is "0": position ()
        mesh, spec, devices, replicas = _sharding(meta)
        storage = getattr(meta, "storage", None)
        chunk_shape = tuple(storage.chunk_shape) if storage is not None and storage.chunk_shape is not None else None
        arrays.append(ArrayInfo(name, tuple(int(d) for d in meta.shape), str(meta.dtype), mesh, spec, devices,
                                replicas, chunk_shape, len(chunks), sum(n for n, _ in chunks.values()),
                                dict(sorted(writers.items())), key, grid))
    root = item.parent.parent if step is not None else None
    pending = sorted(p.name for p in root.iterdir() if _TMP in p.name) if root is not None else []
    return CheckpointInfo(item, "ocdbt" if ocdbt else "zarr", step, arrays, others, pending)


def _grid_position(name: str):
    """A chunk's grid position from its key: ``0.3`` (zarr 2), ``c/0/3`` or ``c.0.3`` (zarr 3); None
    for a key that is not a chunk (``.zarray``, ``zarr.json``)."""
    if name == "c":
        return ()
    if name.startswith(("c/", "c.")):
        name = name[2:]
    parts = re.split(r"[./]", name)
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _key(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _sharding(meta):
    """(mesh axes -> sizes, spec, devices, replicas) from an array's sharding metadata."""
    sharding = getattr(meta, "sharding", None)
    if sharding is None or not hasattr(sharding, "axis_names"):
        return None, None, 1, 1
    mesh = {str(a): int(n) for a, n in zip(sharding.axis_names, sharding.shape)}
    spec = tuple(None if e is None else (e if isinstance(e, str) else tuple(e)) for e in sharding.partition_spec)
    named = {a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
    devices = math.prod(mesh.values())
    replicas = math.prod(n for a, n in mesh.items() if a not in named)
    return mesh, spec, devices, replicas


def placement_figure(info: CheckpointInfo, array_path: str, out):
    """Draw where each piece of ``array_path`` lived when it was saved (its mesh positions, replicas
    together) with the saved chunk grid on top, to the image file ``out``; 1-D and 2-D arrays. Needs
    JAX with as many devices as the saved mesh (``setup_devices``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ckptlab.plotting import plot_sharded_array

    found = {a.path: a for a in info.arrays}
    if array_path not in found:
        raise NotACheckpoint(f"no array {array_path!r} in {info.path}; its arrays: {', '.join(sorted(found))}")
    a = found[array_path]
    if len(a.shape) not in (1, 2):
        raise NotACheckpoint(f"{array_path} has {len(a.shape)} dimensions: a figure draws a 1-D or 2-D array")
    mesh = a.mesh or {"device": 1}
    spec = a.spec if a.spec is not None else ()
    fig, ax = plt.subplots()
    plot_sharded_array(a.shape, mesh, spec, chunk_shape=a.chunk_shape, ax=ax,
                       title=f"{array_path}: saved on {' x '.join(f'{k} {v}' for k, v in mesh.items())}, "
                             f"spec {_spec_text(a.spec)}; chunks dashed")
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def as_json(info: CheckpointInfo) -> str:
    return json.dumps({"path": str(info.path), "layout": info.layout, "step": info.step,
                       "arrays": [{**{k: v for k, v in a.__dict__.items() if k != "chunk_sizes"}, "nbytes": a.nbytes}
                                  for a in info.arrays], "not_arrays": info.others,
                       "bytes_on_disk": info.bytes_on_disk, "per_writer": info.per_writer()}, indent=1, default=list)
