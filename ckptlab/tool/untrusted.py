"""What ``python -m ckptlab`` promises for a checkpoint someone else wrote, and how it keeps it.

- **No code runs.** The tool reads JSON (Orbax's ``_METADATA``, ``_sharding``, the arrays' zarr
  headers), OCDBT's B+tree and the chunks' values through TensorStore, and strings through Orbax's
  restore (JSON, or msgpack): never a pickle, never a module of the checkpoint's.
- **Nothing outside the folder it is given is read.** Before a byte of the checkpoint is read,
  its folder is walked (never through a link): a link whose target is outside that folder, a link
  to nothing, or a file that is not a plain file (a device or a pipe: ``/dev/zero`` named as a chunk,
  a read without end) is refused (:func:`check_contained`).
- **Time and memory follow what is stored, not what the records declare.** ``inspect`` counts a
  chunk grid by arithmetic and lists only the chunks stored. ``plan``, ``measure`` and ``diff``
  refuse a checkpoint that declares far more than it stores (:func:`check_bounded`: more chunks
  than ``SLACK_CHUNKS`` plus ``CHUNKS_PER_STORED`` per chunk stored; for ``measure`` and ``diff``,
  more bytes of values than ``SLACK_BYTES`` plus ``BYTES_PER_STORED`` per byte stored), naming the
  option that accepts it (``--max-chunks``, ``--max-bytes``); and ``diff`` reads only the chunks one
  side or the other stores (those neither stores hold the fill value on both sides).

A checkpoint Orbax saved stores every chunk it declares (or, saved without
``store_array_data_equal_to_fill_value``, leaves out chunks of zeros: a few times its stored bytes
in a real training state), far inside these bounds. Records nested too deep for Python's JSON reader
are refused as damaged.
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path

SLACK_CHUNKS, CHUNKS_PER_STORED = 65_536, 64
SLACK_BYTES, BYTES_PER_STORED = 2**30, 1024


class Unsafe(ValueError):
    """A checkpoint that would have the tool read outside its folder (the message says where)."""


class Unbounded(ValueError):
    """A checkpoint whose records declare far more than it stores (the message names the option
    that accepts it)."""


def check_contained(item: Path, top: Path) -> None:
    """Refuse ``item`` (a checkpoint's folder, inside ``top``: the folder the tool was given) when
    reading it could read outside ``top``: ``item`` itself a link out, a link inside it whose target
    is outside ``top`` or nowhere, or a file that is neither a plain file nor a folder. Walks the
    folder once, never through a link: its cost follows the files it holds."""
    inside = Path(os.path.realpath(top))
    where = Path(os.path.realpath(item))
    if not where.is_relative_to(inside):
        raise Unsafe(f"{item} leads to {where}, outside {top}: this tool reads nothing outside the folder it is "
                     "given. Pass the checkpoint's own folder")
    for here, folders, files in os.walk(item):  # followlinks=False: a linked folder is checked, not entered
        for name in folders + files:
            _check_entry(Path(here, name), inside, top)


def _check_entry(path: Path, inside: Path, top: Path) -> None:
    fix = ("this tool reads nothing outside the folder it is given (a checkpoint from elsewhere could point it "
           "anywhere). If you trust it, copy it with its links followed (cp -rL) and pass the copy")
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        target = Path(os.path.realpath(path))
        if not target.is_relative_to(inside):
            raise Unsafe(f"{path} is a link to {target}, outside {top}: {fix}")
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise Unsafe(f"{path} is a link that leads nowhere ({exc.strerror}): {fix}") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = ("a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a pipe" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a plain file")
        raise Unsafe(f"{path} is {kind}, not a file a save writes: reading it may never end. Pass a checkpoint "
                     "of plain files")


def limits(info, max_chunks: int | None = None, max_bytes: int | None = None) -> tuple[int, int]:
    """The chunks and bytes of values ``info`` may declare: as given, else the defaults (the
    module's text), which follow what it stores."""
    stored = sum(min(a.chunks, a.grid) for a in info.arrays)
    chunks = SLACK_CHUNKS + CHUNKS_PER_STORED * stored if max_chunks is None else int(max_chunks)
    nbytes = SLACK_BYTES + BYTES_PER_STORED * info.stored_bytes if max_bytes is None else int(max_bytes)
    return chunks, nbytes


def check_bounded(info, max_chunks: int | None = None, max_bytes: int | None = None, *, values: bool = True) -> None:
    """Refuse a checkpoint (a :class:`ckptlab.tool.inspection.CheckpointInfo`) whose records declare more
    chunks than :func:`limits` allows, or (``values``: a command whose work follows the values' bytes)
    more bytes of values, naming the array that declares most and the option that accepts it."""
    chunk_limit, byte_limit = limits(info, max_chunks, max_bytes)
    declared = sum(a.grid for a in info.arrays)
    stored = sum(min(a.chunks, a.grid) for a in info.arrays)
    if declared > chunk_limit:
        a = max(info.arrays, key=lambda a: a.grid - a.chunks)
        raise Unbounded(f"{info.path} declares {declared:,} chunks and stores {stored:,} ({a.path}: {a.grid:,} chunks "
                        f"of {a.chunk_shape} over {a.shape}, {a.chunks:,} stored): more than the {chunk_limit:,} "
                        f"this command walks{_default(max_chunks, 'chunks')}. A checkpoint a save wrote stores the "
                        f"chunks it declares; if you trust this one, pass --max-chunks {declared} (max_chunks= in Python)")
    if values and info.nbytes > byte_limit:
        a = max(info.arrays, key=lambda a: a.nbytes - a.stored_bytes)
        raise Unbounded(f"{info.path} declares {_size(info.nbytes)} of values and stores {_size(info.stored_bytes)} "
                        f"({a.path}: {a.shape} {a.dtype}, {_size(a.nbytes)}, {_size(a.stored_bytes)} stored): more "
                        f"than the {_size(byte_limit)} this command reads and holds{_default(max_bytes, 'bytes')}. "
                        f"If you trust it, pass --max-bytes {info.nbytes} (max_bytes= in Python)")


def _default(given, what: str) -> str:
    if given is not None:
        return " (as asked)"
    if what == "chunks":
        return f" by default ({SLACK_CHUNKS:,}, and {CHUNKS_PER_STORED} per chunk stored)"
    return f" by default ({_size(SLACK_BYTES)}, and {BYTES_PER_STORED:,} times the bytes stored)"


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 2**20 else f"{n / 2**30:,.2f} GiB"


def parse_size(text: str) -> int:
    """``1234``, ``64GiB``, ``64G``, ``512MiB``, ``2TB`` (powers of 1024) -> bytes: the ``--max-bytes`` option."""
    units = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    number, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise ValueError(f"--max-bytes {text!r}: write a number of bytes, e.g. 68719476736 or 64GiB") from None
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"--max-bytes {text!r}: write a number of bytes at or above 0, e.g. 64GiB")
    return int(value)
