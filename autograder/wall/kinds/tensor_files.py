"""A safetensors file the grader writes with the ``safetensors`` package itself
(:class:`SafetensorsArg`), whole or damaged on purpose, and each damage in words."""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from autograder.wall.kinds.base import MOST_SHOWN, FileKind, plural, shape_in_words

# Damage a safetensors file can have, and the word a clear error about it must use.
TRUNCATED = ("short", "header_cut", "huge_length", "data_cut")
CORRUPT = ("bad_json", "not_object", "bad_utf8", "bad_entry", "bad_dtype", "bad_shape")

# Each damage (TRUNCATED and CORRUPT) in words, as SafetensorsArg.content does it.
DAMAGE = {
    "short": "cut short before the end of its 8-byte header length",
    "header_cut": "cut short inside its header",
    "huge_length": "whose 8-byte header length claims far more bytes than the file holds",
    "data_cut": "cut short inside its data section",
    "bad_json": "whose header is not valid JSON",
    "not_object": "whose header is JSON but not an object",
    "bad_utf8": "whose header is not valid UTF-8",
    "bad_entry": "with a tensor entry whose data_offsets are not [begin, end]",
    "bad_dtype": "with a tensor entry whose dtype is not a string",
    "bad_shape": "with a tensor entry whose shape is not a list",
}


@dataclass(frozen=True)
class SafetensorsArg(FileKind):
    """A safetensors file written with the ``safetensors`` package itself.

    ``tensors`` is ``((name, shape, numpy dtype name), ...)``; values are drawn from ``seed``.
    ``damage`` (one of :data:`TRUNCATED` or :data:`CORRUPT`) breaks the file on purpose.
    """

    tensors: tuple
    seed: int
    metadata: tuple = ()  # ((key, value), ...): the optional "__metadata__" of the header
    damage: str = ""

    def values(self) -> dict:
        rng = np.random.default_rng(self.seed)
        out = {}
        for name, shape, dtype in self.tensors:
            kind = np.dtype(dtype).kind
            if kind == "f":
                out[name] = rng.standard_normal(shape).astype(dtype)
            elif kind == "b":
                out[name] = rng.integers(0, 2, size=shape).astype(bool)
            else:
                info = np.iinfo(dtype)
                out[name] = rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
        return out

    def intact(self) -> bytes:
        return self._intact

    @cached_property
    def _intact(self) -> bytes:  # made once: judging a case asks for it several times
        from safetensors.numpy import save

        return save(self.values(), metadata=dict(self.metadata) or None)

    def header_size(self) -> int:
        """N, the header's length in bytes (data starts at 8 + N)."""
        return int.from_bytes(self.intact()[:8], "little")

    def header(self) -> dict:
        """The header as the file has it (``__metadata__`` included)."""
        return json.loads(self.intact()[8:8 + self.header_size()])

    def tensor_base(self, name: str) -> int:
        """Where tensor ``name`` starts in the file (safetensors orders tensors by alignment, then name)."""
        return 8 + self.header_size() + self.header()[name]["data_offsets"][0]

    def nbytes(self, name: str, bounds=None) -> int:
        """Bytes of tensor ``name``, or of its shard ``bounds``."""
        shape, dtype = next((s, d) for t, s, d in self.tensors if t == name)
        sizes = shape if bounds is None else [stop - start for start, stop in bounds]
        return math.prod(sizes) * np.dtype(dtype).itemsize

    def read_budget(self, name: str, bounds) -> int:
        """Bytes a read of shard ``bounds`` of ``name`` may take (see :func:`autograder.wall.reads.read_budget`)."""
        from autograder.wall.reads import read_budget

        return read_budget(self.header_size(), self.nbytes(name, bounds))

    def content(self) -> bytes:
        data = self.intact()
        if not self.damage:
            return data
        n = int.from_bytes(data[:8], "little")
        header, body = data[8:8 + n], data[8 + n:]
        damaged = {  # built for the damage asked only: each is a copy of the file (64 MiB in Unit 6)
            "short": lambda: data[:5],
            "header_cut": lambda: data[: 8 + n // 2],
            "huge_length": lambda: (2**40).to_bytes(8, "little") + data[8:],
            "data_cut": lambda: data[: 8 + n + len(body) // 2],
            "bad_json": lambda: data[:8] + b"{" + b"#" * (n - 1) + body,
            "not_object": lambda: data[:8] + b"[" + b" " * (n - 2) + b"]" + body,
            "bad_utf8": lambda: data[:8] + header[:2] + b"\xff\xfe" + header[4:] + body,
            "bad_entry": lambda: data[:8] + _break_entry(header, "data_offsets") + body,
            "bad_dtype": lambda: data[:8] + _break_entry(header, "dtype") + body,
            "bad_shape": lambda: data[:8] + _break_entry(header, "shape") + body,
        }
        return damaged[self.damage]()

    def save(self, directory: str) -> str:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"model-{uuid.uuid4().hex[:8]}.safetensors")
        with open(path, "wb") as f:
            f.write(self.content())
        if self.data_bytes() > 2**23:  # a big file's bytes are not kept in the grader's memory while it grades
            self.__dict__.pop("_intact", None)
        return path

    def data_bytes(self) -> int:
        """Bytes of the file's data section (every tensor's)."""
        return sum(self.nbytes(name) for name, _, _ in self.tensors)

    def realize(self, workdir: str, made=None) -> str:
        return self.save(workdir)

    def words(self) -> str:
        n = len(self.tensors)
        shown = [f"{name} {shape_in_words(shape)} {dtype}" for name, shape, dtype in self.tensors[:MOST_SHOWN]]
        if n > MOST_SHOWN:
            shown.append(f"and {n - MOST_SHOWN} more")
        text = f"<a safetensors file ({plural(n, 'tensor')}: {', '.join(shown)}"
        if self.metadata:
            text += f"; __metadata__ {dict(self.metadata)!r}"
        text += ")"
        if self.damage:
            text += " " + DAMAGE[self.damage]
        return text + ">"


def _break_entry(header: bytes, field: str) -> bytes:
    """The same header (same length), one tensor's ``field`` of another JSON type: "data_offsets" not
    [begin, end], a "dtype" not a str (an int), a "shape" not a list ("16x8"): each shorter, so it fits."""
    parsed = json.loads(header)
    entry = parsed[next(k for k in parsed if k != "__metadata__")]
    entry[field] = {"data_offsets": "x", "dtype": 4, "shape": "x".join(map(str, entry["shape"]))}[field]
    text = json.dumps(parsed, separators=(",", ":")).encode()
    assert len(text) <= len(header)
    return text.ljust(len(header))
