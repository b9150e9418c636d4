"""Frames between the grader and a worker: a 4-byte little-endian length, then that much JSON.

The grader reads what the worker sends as hostile: a frame's length is checked before anything
is allocated (:data:`MAX_FRAME`), reads have a deadline, and a frame that is not JSON is an error
for that problem only. Standard library only: the worker imports it before its jail is on.
"""

from __future__ import annotations

import json
import os
import re
import select
import struct
import time

HEADER = struct.Struct("<I")
MAX_FRAME = 32 * 2**20  # a problem's whole answer for one case is a few KiB; 32 MiB is far beyond it


class FrameError(Exception):
    """The other side sent something that is not a frame, or nothing in time."""


def encode(message) -> bytes:
    data = json.dumps(message, allow_nan=False, separators=(",", ":")).encode()
    return HEADER.pack(len(data)) + data


def send(fd: int, message, deadline: float | None = None) -> int:
    """Write one frame; return its size in bytes. With a deadline, ``fd`` must be non-blocking."""
    data = memoryview(encode(message))
    sent = 0
    while sent < len(data):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise FrameError("the worker did not take its input in time")
        try:
            sent += os.write(fd, data[sent:])
        except BlockingIOError:
            continue
        except (BrokenPipeError, OSError) as exc:
            raise FrameError(f"the worker is gone ({type(exc).__name__})") from None
    return len(data)


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise FrameError("timeout")
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise FrameError("the frame was cut short")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(fd: int, deadline: float | None = None, limit: int = MAX_FRAME):
    """Read one frame and return its JSON, or None at end of input. Raises :class:`FrameError`
    for a frame over ``limit`` bytes (before reading it), malformed JSON, or the deadline."""
    head = _read_exactly(fd, HEADER.size, deadline)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > limit:
        raise FrameError(f"a frame of {size:,} bytes is over the {limit:,}-byte limit")
    body = _read_exactly(fd, size, deadline)
    if body is None:
        raise FrameError("the frame was cut short")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"not JSON ({type(exc).__name__})") from None


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,60}(\.[A-Za-z_][A-Za-z0-9_]{0,60}){0,4}")
ERROR_KINDS = ("exception", "memory", "not_implemented", "setup", "bad_return", "devices")


def clean_error(raw) -> dict:
    """An error frame from the worker, reduced to bounded plain fields of known kinds."""
    raw = raw if isinstance(raw, dict) else {}
    kind = raw.get("kind") if raw.get("kind") in ERROR_KINDS else "exception"
    line = raw.get("line") if type(raw.get("line")) is int else None
    mro = [m[:100] for m in raw.get("mro", [])[:64] if isinstance(m, str)] if isinstance(raw.get("mro"), list) else []
    text = lambda k: raw.get(k)[:500] if isinstance(raw.get(k), str) else ""  # noqa: E731
    extension = raw.get("extension") if isinstance(raw.get("extension"), str) \
        and _MODULE_NAME.fullmatch(raw["extension"]) else ""
    return {"kind": kind, "type": text("type")[:100], "line": line, "mro": mro, "message": text("message"),
            "detail": text("detail"), "extension": extension}
