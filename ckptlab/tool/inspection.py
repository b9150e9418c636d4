"""What is in an Orbax checkpoint, from its metadata and its files, without reading an array.

    from ckptlab.tool.inspection import inspect_checkpoint
    info = inspect_checkpoint("runs/ckpt")        # a pytree folder, a step, or a CheckpointManager root
    print(info.table())                           # or: python -m ckptlab inspect runs/ckpt

Per array: its path in the tree (keys joined by "/"; a key holding a "/" is quoted, so that no two
leaves print alike), shape, dtype, where it was saved from (the mesh's axes and sizes, the spec,
how many devices; one device, by name; or host memory, for a NumPy array), the chunk shape Orbax
stored it in, how many chunks are stored, their bytes as stored, which writer folder holds them
(``ocdbt.process_N``: one per process that saved), and the replicas (the devices holding each
distinct shard: the mesh axes the spec does not name). Stored bytes are on disk as they are, but
for chunks of at most 1 KiB that OCDBT keeps inline in its B+tree's nodes: those are the values'
encoded bytes before the tree compresses its nodes, and the table gives the nodes' own size on
disk beside them. Leaves that are not arrays (strings) are listed by path and kind.

Everything comes from the checkpoint's own records: Orbax's ``metadata()`` for the tree, shapes,
dtypes, shardings and chunk shapes, and for the bytes, the OCDBT B+tree (``tensorstore.ocdbt.dump``:
each chunk's file, offset and length, read from the tree's nodes, never from the values) or, for a
checkpoint saved without OCDBT, the chunk files' sizes. Layouts read: OCDBT and plain zarr; Orbax's
v0 (``StandardCheckpointer``, ``PyTreeCheckpointer``, ``CheckpointManager`` items such as
``default``) and v1 (``state``) folders; a ``CheckpointManager`` root (its newest committed step, or
the one asked for; step folders named as Orbax names them, with a prefix or a fixed length). A
folder that is none of these, a step still being written, a v1 partial save never finalized, or a
checkpoint missing a record is refused with what to pass (or do) instead.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ckptlab.tool.objectstore import copy_of, kvstore, local, prepare
from ckptlab.tool.untrusted import check_contained

_TMP = ".orbax-checkpoint-tmp"
_PARTIAL = ".partial_save"  # Orbax v1's partial saves (PARTIAL_SAVE_SUFFIX in its partial/path.py)
_INLINE = "inline in the B+tree"
_ITEM_FILES = ("_METADATA", "_sharding", "manifest.ocdbt", "array_metadatas")  # what a saved pytree holds


class NotACheckpoint(ValueError):
    """The path is not a checkpoint this tool reads (the message says what to pass)."""


class Damaged(NotACheckpoint):
    """A checkpoint missing a record, or with one damaged (the message says which, and what to do)."""


@dataclass
class ArrayInfo:
    path: str  # the leaf's path in the tree as printed (path_text of its keys)
    shape: tuple
    dtype: str
    mesh: dict | None  # the saved mesh's axes and sizes, None for a single device or a host array
    spec: tuple | None  # the saved PartitionSpec, as entries (None, "x", ("x", "y"))
    devices: int  # devices it was saved from (1 for a host array)
    replicas: int  # devices holding each distinct shard
    chunk_shape: tuple | None
    chunks: int  # chunks stored
    stored_bytes: int  # the chunks' bytes as stored (inline ones before the B+tree's compression)
    writers: dict = field(default_factory=dict)  # where the chunks are -> their stored bytes
    storage_key: str = ""
    chunk_sizes: dict = field(default_factory=dict, repr=False)  # chunk grid position -> stored bytes
    keys: tuple = ()  # the leaf's keys, one per level of the tree: its identity
    saved_on: str = ""  # "data 2 x model 8", "device cpu:3" or "host (NumPy)"

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape)) * _itemsize(self.dtype) if self.shape is not None else 0

    @property
    def grid(self) -> int:
        """The chunks its records declare, by arithmetic (``chunks`` is those stored): the product of
        ``ceil(dim / chunk)``, never a list of them."""
        from ckptlab.layout import grid_size

        return grid_size(self.shape, self.chunk_shape or self.shape)


@dataclass
class OtherInfo:
    """A leaf that is not an array: Orbax keeps its value outside the arrays (a string in _strings.json)."""

    path: str
    keys: tuple
    kind: str  # "string", or the type Orbax's metadata names


@dataclass
class CheckpointInfo:
    path: Path  # the pytree folder read
    layout: str  # "ocdbt" or "zarr"
    step: int | None
    arrays: list[ArrayInfo]
    others: list[OtherInfo]  # leaves that are not arrays
    pending: list[str] = field(default_factory=list)  # a root's steps still being written (or abandoned)
    tree_bytes: int = 0  # the OCDBT B+tree's nodes on disk (holding the inline chunks), from its manifest
    metadata: object = field(default=None, repr=False)  # Orbax's metadata tree, as read

    @property
    def stored_bytes(self) -> int:
        return sum(a.stored_bytes for a in self.arrays)

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
        rows = [("array", "shape", "dtype", "saved on", "spec", "replicas", "chunk", "chunks", "stored")]
        for a in self.arrays:
            rows.append((a.path, str(a.shape), a.dtype, a.saved_on, spec_text(a.spec), str(a.replicas),
                         str(a.chunk_shape), str(a.chunks), human(a.stored_bytes)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{self.path}  ({self.layout}{'' if self.step is None else f', step {self.step}'})"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.append(f"{len(self.arrays)} arrays, {human(self.nbytes)} of values, {human(self.stored_bytes)} stored")
        if self.per_writer():
            lines.append("stored, by where: " + "; ".join(self._where(w, n) for w, n in self.per_writer().items()))
        if self.pending:
            lines.append(f"steps still being written or abandoned, not read: {', '.join(self.pending)}")
        if self.others:
            lines.append(f"not arrays: {', '.join(f'{o.path} ({o.kind})' for o in self.others)}")
        return "\n".join(lines)

    def _where(self, writer: str, n: int) -> str:
        if writer == _INLINE:  # encoded values, compressed again with the keys inside the tree's nodes
            return (f"{writer} {human(n)} (the values' encoded bytes, before the tree's compression; "
                    f"its nodes take {human(self.tree_bytes)} on disk, keys included)")
        return f"{writer} {human(n)} (on disk)"


def human(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GiB"


def path_text(keys) -> str:
    """A leaf's keys as one path, joined by "/"; a key that holds a "/" (or is empty, or starts with
    a quote) is quoted as JSON, so that ``{"x/y": a}`` (``"x/y"``) and ``{"x": {"y": b}}`` (``x/y``)
    never print alike."""
    return "/".join(json.dumps(k) if not k or "/" in k or k.startswith('"') else k for k in keys)


def natural_key(keys) -> tuple:
    """A sort key for a leaf's keys in natural order: the numbers in a key by value, so that
    ``layers_2`` comes before ``layers_10`` (and ``2`` before ``10``); the keys themselves break ties."""
    return tuple((tuple(int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", k))), k) for k in keys)


def leaf_keys(keypath) -> tuple:
    """A JAX key path as a tuple of strings, one per level (a dict key, a list index, an attribute)."""
    return tuple(_key(e) for e in keypath)


def _itemsize(dtype: str) -> int:
    import ml_dtypes  # noqa: F401  (bfloat16 and the float8 types by name)
    import numpy as np

    return np.dtype(dtype).itemsize


def spec_text(spec) -> str:
    if spec is None:
        return "-"
    return "P(" + ", ".join(repr(e) if e is not None else "None" for e in spec) + ")"


# ------------------------------------------------------------------------------ finding the item
def absolute(path) -> Path:
    """``path`` made absolute (Orbax's ``metadata()`` reads nothing from a relative one)."""
    return Path(os.path.abspath(os.fspath(path)))


def _steps(root: Path) -> dict:
    """{step: folder} for the committed step folders of ``root``, named as Orbax names them (``12``,
    ``ckpt_000012``, ``step_12``: its own parser, :func:`ckptlab.steps.step_of`); a prefixed name
    counts only with Orbax's step record inside (a folder ``layer_1`` of something else does not)."""
    from ckptlab.steps import step_of

    steps: dict = {}
    for p in sorted(root.iterdir()):
        if not p.is_dir() or _TMP in p.name or _PARTIAL in p.name:
            continue
        step = step_of(p.name)
        if step is not None and (p.name.isdigit() or (p / "_CHECKPOINT_METADATA").exists()):
            steps.setdefault(step, p)
    return steps


def _partial_save(path: Path) -> Path | None:
    """The checkpoint a v1 partial save (``ocp_v1.partial.save``, never finalized) is for, when
    ``path`` is it, its ``.partial_save`` folder, or a folder inside that one; else None."""
    for p in (*reversed(path.parents), path):  # the outermost: the pending folders inside repeat the name
        if _PARTIAL in p.name:
            return p.parent / p.name.split(_PARTIAL)[0]
    if not path.exists() and (path.parent / (path.name + _PARTIAL)).is_dir():
        return path
    return None


def _looks_like_item(folder: Path) -> bool:
    return any((folder / name).exists() for name in _ITEM_FILES) or any(folder.glob("ocdbt.process_*"))


def _item(folder: Path) -> Path:
    """The pytree folder in ``folder``: itself, or its one item (a step's ``default``, a v1 ``state``)."""
    if (folder / "_METADATA").exists():
        return folder
    # an OCDBT writer's folder holds a manifest too: a part of an item, never one
    items = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("ocdbt.process_")
                   and _looks_like_item(p))
    whole = [p for p in items if (p / "_METADATA").exists()]
    if len(whole) > 1:
        raise NotACheckpoint(f"{folder} holds several items ({', '.join(p.name for p in whole)}): pass one of them")
    if len(whole) == 1 and (folder / "_CHECKPOINT_METADATA").exists():
        return whole[0]
    damaged = [folder] if _looks_like_item(folder) else [p for p in items if p not in whole]
    if damaged:
        raise Damaged(f"{damaged[0]} has no _METADATA, the record of its tree Orbax reads first (deleted, "
                             "or its save never finished): it cannot be read. Restore the folder from a copy, "
                             "or pass another checkpoint")
    pending = sorted(p.name for p in folder.iterdir() if _TMP in p.name)
    if pending:
        raise NotACheckpoint(f"{folder} holds only steps still being written ({', '.join(pending)}): "
                             "wait for the save to commit, or pass an older step")
    raise NotACheckpoint(f"{folder} is not an Orbax checkpoint: no _METADATA in it, in an item folder, or in a step "
                         "folder. Pass the folder a save wrote (or a CheckpointManager root)")


def _older(steps: dict, step: int) -> str:
    """What to pass instead of a manager's step that cannot be read."""
    older = sorted((s for s in steps if s < step), reverse=True)
    if not older:
        return f"; step {step} is the root's only step, or its oldest"
    return f"; the root's older steps: {', '.join(map(str, older))} (pass --step {older[0]}, or step={older[0]})"


def locate(path, step: int | None = None) -> tuple[Path, int | None, Path | None]:
    """The pytree folder to read under ``path``, its step, and the folder of steps it was chosen
    among (both None outside a manager)."""
    path = absolute(path)
    partial = _partial_save(path)
    if partial is not None:
        raise NotACheckpoint(f"{partial} is a partial save never finalized (Orbax v1's partial.save; its pieces are in "
                             f"{partial.name}{_PARTIAL}): call orbax.checkpoint.v1.partial.finalize('{partial}') "
                             f"to make it a checkpoint, then pass {partial}")
    if not path.exists():
        raise NotACheckpoint(f"{path} does not exist: pass an Orbax checkpoint folder")
    if not path.is_dir():
        from ckptlab.tool.files import why_not_a_folder

        raise NotACheckpoint(why_not_a_folder(path))
    if _TMP in path.name:
        raise NotACheckpoint(f"{path} is a checkpoint still being written (or abandoned by a killed save): "
                             "pass a committed step")
    if (path / "_METADATA").exists():
        return path, None, None
    steps = _steps(path)
    if steps:
        if step is None:
            step = max(steps)
        elif step not in steps:
            raise NotACheckpoint(f"{path} has no step {step}; its steps: {sorted(steps)}")
        try:
            return _item(steps[step]), step, path
        except Damaged as exc:
            raise Damaged(f"{exc}{_older(steps, step)}") from None
    if step is not None:
        raise NotACheckpoint(f"{path} is not a CheckpointManager root (no step folders): drop --step")
    from ckptlab.steps import step_of

    item = _item(path)  # a step (or a v1 folder) and its one item
    number = step_of(path.name)
    return (item, number, path.parent) if number is not None else (item, None, None)


# ------------------------------------------------------------------------------ bytes stored
def _ocdbt_sizes(item: Path) -> tuple[dict, int]:
    """{storage key: (bytes, writer)} for every key of the item's OCDBT database, from its B+tree,
    and the tree's own bytes on disk (its nodes, which hold the inline values)."""
    import tensorstore as ts

    base = ts.KvStore.open(kvstore(item)).result()  # a local folder, or the object store's prefix
    manifest = ts.ocdbt.dump(base).result()
    sizes: dict = {}
    if not manifest.get("versions") or "location" not in manifest["versions"][-1]["root"]:
        return sizes, 0  # an empty database
    root = manifest["versions"][-1]["root"]

    def walk(location: str, height: int):
        node = ts.ocdbt.dump(base, location).result()
        for entry in node["entries"]:
            key = entry["key"].decode() if isinstance(entry["key"], bytes) else entry["key"]
            if node["height"] > 0:
                walk(entry["node"], node["height"] - 1)
            elif "inline_value" in entry:
                sizes[key] = (len(entry["inline_value"]), _INLINE)
            else:
                ref = entry["indirect_value"]  # "value:<base path>:<file>:<offset>:<length>"
                sizes[key] = (int(ref.rsplit(":", 1)[1]), _writer(ref))

    walk(root["location"], manifest["versions"][-1].get("root_height", 0))
    return sizes, int(root.get("statistics", {}).get("num_tree_bytes", 0))


def _writer(reference: str) -> str:
    """The writer folder of a value's reference: its base path (``ocdbt.process_0/``, or a v1 partial
    save's ``ocdbt.process_0a690ab7...``), empty for the checkpoint's own data files."""
    head = reference.rsplit(":", 3)[0]  # "value:<base path>"
    base = head.split(":", 1)[1].strip("/") if ":" in head else ""
    return base or "the checkpoint's own folder"


def _zarr_sizes(item: Path, key: str) -> dict:
    folder = item / key
    if not folder.is_dir():
        return {}
    return {f"{key}/{p.relative_to(folder)}": (p.stat().st_size, "the array's folder")
            for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".") and p.name != "zarr.json"}


# ------------------------------------------------------------------------------ the records
def _records(item: Path) -> bool:
    """Whether ``item`` is OCDBT, once its records are found whole; else why it cannot be read."""
    what = "Restore the folder from a copy, or pass another checkpoint"
    try:
        record = json.loads((item / "_METADATA").read_text())
    except (OSError, ValueError, RecursionError) as exc:  # (nested deeper than Python's JSON reader goes)
        raise Damaged(f"{item}/_METADATA is damaged (not the JSON Orbax writes: {exc}): the tree it records "
                             f"cannot be read. {what}") from None
    if not isinstance(record, dict) or "tree_metadata" not in record:
        raise Damaged(f"{item}/_METADATA is damaged (no tree_metadata, the record of the tree): {what}")
    ocdbt = (item / "manifest.ocdbt").exists() or bool(record.get("use_ocdbt")) or any(item.glob("ocdbt.process_*"))
    if not ocdbt and copy_of(item) is not None:  # its chunks' sizes are its files' sizes: a listing gives none
        raise NotACheckpoint(f"{item} was saved without OCDBT: this tool reads such a checkpoint from local disk only. "
                             "Copy it to a local folder (aws s3 cp --recursive) and pass that folder")
    if ocdbt and not (item / "manifest.ocdbt").exists():
        raise Damaged(f"{item}/manifest.ocdbt is missing: the OCDBT database's root, without which none of its "
                             f"arrays can be found. {what}")
    return ocdbt


def _orbax_tree(item: Path):
    import orbax.checkpoint as ocp

    collecting = gc.isenabled()
    gc.disable()  # Orbax makes objects per leaf, kept: a collection now and then would scan them all again
    try:
        meta = ocp.StandardCheckpointer().metadata(item)
        return meta.item_metadata.tree
    except Exception as exc:  # Orbax logs why, and returns no item metadata
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0]}" if str(exc) else type(exc).__name__
        raise Damaged(f"{item}: Orbax could not read its metadata ({reason}): a record it needs is missing or "
                             "damaged. Restore the folder from a copy, or pass another checkpoint") from exc
    finally:
        if collecting:
            gc.enable()


# ------------------------------------------------------------------------------ the whole
def inspect_checkpoint(path, step: int | None = None) -> CheckpointInfo:
    """What the checkpoint at ``path`` holds, array by array (see the module's text)."""
    path = local(path)  # an s3:// url: its records, copied (ckptlab.tool.objectstore)
    item, step, root = locate(path, step)
    check_contained(item, absolute(path))  # before a byte of it is read: nothing outside the folder given
    prepare(item)  # an object store's: its arrays' headers, where Orbax reads them
    try:
        ocdbt = _records(item)
        try:
            sizes, tree_bytes = _ocdbt_sizes(item) if ocdbt else ({}, 0)
        except ValueError as exc:  # TensorStore's NOT_FOUND or DATA_LOSS, in one line
            raise Damaged(f"{item}: its OCDBT database cannot be read ({str(exc).splitlines()[0]}): a file of it "
                                 "is missing or damaged. Restore the folder from a copy, or pass another checkpoint") from None
        tree = _orbax_tree(item)
    except Damaged as exc:
        if step is None or root is None:
            raise
        raise Damaged(f"{exc}{_older(_steps(root), step)}") from None
    arrays, others = _leaves(item, tree, ocdbt, sizes)
    pending = sorted(p.name for p in root.iterdir() if _TMP in p.name) if root is not None else []
    arrays, others = (sorted(x, key=lambda leaf: natural_key(leaf.keys)) for x in (arrays, others))  # layers_2, layers_10
    return CheckpointInfo(item, "ocdbt" if ocdbt else "zarr", step, arrays, others, pending, tree_bytes, tree)


def _leaves(item: Path, tree, ocdbt: bool, sizes: dict) -> tuple[list, list]:
    import jax

    from ckptlab.layout import chunk_index

    arrays, others = [], []
    index = chunk_index(sizes) if ocdbt else {}  # every key read once, not once per array
    for keypath, meta in jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: hasattr(x, "storage"))[0]:
        keys = leaf_keys(keypath)
        if not hasattr(meta, "shape") or not hasattr(meta, "storage"):
            others.append(OtherInfo(path_text(keys), keys, kind_of(meta)))
            continue
        key = getattr(meta, "name", None) or ".".join(keys)
        found = sizes if ocdbt else _zarr_sizes(item, key)
        positions = index.get(key, {}) if ocdbt else chunk_index(found).get(key, {})
        chunks = {k: found[k] for k in positions}
        writers: dict = {}
        grid = {}
        for k, (n, writer) in chunks.items():
            writers[writer] = writers.get(writer, 0) + n
            grid[positions[k][: len(meta.shape)]] = n  # a scalar's one chunk: position ()
        mesh, spec, devices, replicas, saved_on = _sharding(meta)
        storage = getattr(meta, "storage", None)
        chunk_shape = tuple(storage.chunk_shape) if storage is not None and storage.chunk_shape is not None else None
        arrays.append(ArrayInfo(path_text(keys), tuple(int(d) for d in meta.shape), str(meta.dtype), mesh, spec,
                                devices, replicas, chunk_shape, len(chunks), sum(n for n, _ in chunks.values()),
                                dict(sorted(writers.items())), key, grid, keys, saved_on))
    return arrays, others


def kind_of(meta) -> str:
    """A leaf's kind, as Orbax's metadata says it: "string", "array int32 (3,)", or the type's name."""
    name = type(meta).__name__
    if name == "StringMetadata":
        return "string"
    if hasattr(meta, "shape") and hasattr(meta, "dtype"):
        return f"array {meta.dtype} {tuple(meta.shape)}"
    return name.removesuffix("Metadata").lower() or name


def _key(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _sharding(meta):
    """(mesh axes -> sizes, spec, devices, replicas, where it was saved from) from an array's metadata."""
    sharding = getattr(meta, "sharding", None)
    if sharding is None:  # a NumPy array or a Python scalar: saved from host memory
        return None, None, 1, 1, "host (NumPy)"
    if not hasattr(sharding, "axis_names"):
        device = getattr(sharding, "device_str", None)
        return None, None, 1, 1, f"device {device}" if device else "1 device"
    mesh = {str(a): int(n) for a, n in zip(sharding.axis_names, sharding.shape)}
    spec = tuple(None if e is None else (e if isinstance(e, str) else tuple(e)) for e in sharding.partition_spec)
    named = {a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
    devices = math.prod(mesh.values())
    replicas = math.prod(n for a, n in mesh.items() if a not in named)
    return mesh, spec, devices, replicas, " x ".join(f"{k} {v}" for k, v in mesh.items())


def as_json(info: CheckpointInfo) -> str:
    return json.dumps({"path": str(info.path), "layout": info.layout, "step": info.step, "pending": info.pending,
                       "arrays": [{**{k: v for k, v in a.__dict__.items() if k != "chunk_sizes"}, "nbytes": a.nbytes}
                                  for a in info.arrays],
                       "not_arrays": [o.__dict__ for o in info.others], "stored_bytes": info.stored_bytes,
                       "per_writer": info.per_writer(), "tree_bytes_on_disk": info.tree_bytes}, indent=1, default=list)
