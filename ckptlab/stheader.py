"""A safetensors header's JSON, read as strictly as the safetensors library reads it, so that no file
this course accepts is one that ``safetensors.safe_open`` (and so transformers) refuses.

The library's reader is Rust (serde_json into its own types), stricter than Python's ``json``:
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON, anywhere in the header;
- a string may not hold a lone surrogate (``"\\ud800"``), which is no character;
- ``__metadata__`` is null or an object whose values are all strings (``{"format": "pt"}``): a number,
  a list or an object among them is refused (``{"format": "pt", "total_size": 1234}`` is);
- ``__metadata__`` twice, or a tensor's ``dtype``, ``shape`` or ``data_offsets`` twice, is refused.
What it lets through, this does too: a tensor named twice (the last one counts, as in Python's
``json``; each must be a tensor's entry), a key named twice inside ``__metadata__`` (each value a
string), a tensor's fields it does not know. (Checked both
ways against ``safe_open`` on generated headers: tests/solutions/test_hf_strict.py.)
"""

from __future__ import annotations

import json

METADATA = "__metadata__"
FIELDS = ("dtype", "shape", "data_offsets")  # a tensor's own fields: each once


class HeaderError(ValueError):
    """The header is one ``safe_open`` refuses: the message says why."""


class _Object(dict):
    """A JSON object, with the keys it held more than once (Python's json keeps the last silently) and
    every pair it held: the library reads each value, one a later key overwrites too."""

    twice: frozenset = frozenset()
    pairs: tuple = ()


def _object(pairs) -> _Object:
    out, seen, twice = _Object(), set(), set()
    for key, value in pairs:
        if key in seen:
            twice.add(key)
        seen.add(key)
        out[key] = value
    out.twice, out.pairs = frozenset(twice), tuple(pairs)
    return out


def pairs(header: dict) -> tuple:
    """Every (key, value) of a header :func:`parse` gave, in order, those a later key overwrote too:
    the library checks each tensor's entry, even one named again later."""
    return header.pairs if isinstance(header, _Object) else tuple(header.items())


def _constant(name: str):
    raise HeaderError(f"its header holds {name}, which is not JSON: safetensors' safe_open refuses it (write "
                      "only finite numbers; json.dumps(..., allow_nan=False) says where)")


def _text_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings_ok(value) -> bool:
    """Whether every key and string in ``value`` is real text (no lone surrogate)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not _text_ok(v):
                return False
        elif isinstance(v, dict):
            for k, item in pairs(v):  # (a value a later key overwrote too: the library reads each)
                if not _text_ok(k):
                    return False
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)
    return True


def parse(raw: bytes) -> dict:
    """The header's JSON object (``raw``: its N bytes), or :class:`HeaderError` where ``safe_open``
    would refuse it. A tensor's entry is left for the caller to check (its dtype, shape, offsets)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HeaderError("its header is not JSON (its bytes are not UTF-8 text)") from None
    try:
        header = json.loads(text, parse_constant=_constant, object_pairs_hook=_object)
    except HeaderError:
        raise
    except (ValueError, RecursionError):  # (RecursionError: nested too deep)
        raise HeaderError("its header is not JSON") from None
    if not isinstance(header, dict):
        raise HeaderError("its header is not a JSON object")
    if not _strings_ok(header):
        raise HeaderError("its header holds a lone surrogate (an escape such as \\ud800 that is no character): "
                          "safetensors' safe_open refuses it")
    if METADATA in header.twice:
        raise HeaderError(f"its header holds {METADATA} twice: safetensors' safe_open refuses it")
    meta = header.get(METADATA)
    if meta is not None:
        if not isinstance(meta, dict):
            raise HeaderError(f"its {METADATA} is a {type(meta).__name__}, not an object of strings: safetensors' "
                              "safe_open refuses it")
        for key, value in pairs(meta):  # (one a later key overwrites too: the library reads each)
            if not isinstance(value, str):
                shown = json.dumps(value)[:40]
                raise HeaderError(f"its {METADATA} holds {key!r}: {shown}, not a string: safetensors' safe_open "
                                  "refuses a file whose metadata values are not all strings (write str(value))")
    for key, entry in header.items():
        if key != METADATA and isinstance(entry, _Object):
            twice = sorted(set(FIELDS) & entry.twice)
            if twice:
                raise HeaderError(f"tensor {key!r} names its {twice[0]} twice: safetensors' safe_open refuses it")
    return header
