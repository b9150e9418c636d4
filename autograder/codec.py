"""Plain-data encoding for everything that crosses between the grader and a worker: JSON only.

Arrays travel as dtype, shape and a flat list of numbers; tuples, dicts with non-string keys and
NumPy scalars are tagged so that exact types survive the trip. Nothing is ever pickled, and
decoding never builds anything but built-in types and NumPy arrays.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

MAX_ELEMENTS = 10_000_000  # refuse to ship absurd outputs (a learner returning a huge array)


class EncodeError(TypeError):
    """A value that is not plain data (or too big to ship)."""


def _dtype_name(dtype: np.dtype) -> str:
    return np.dtype(dtype).name


def _float_out(v: float):
    # JSON has no NaN/inf; tag them so they survive and can be reported as NaN.
    if math.isnan(v):
        return {"$f": "nan"}
    if math.isinf(v):
        return {"$f": "inf" if v > 0 else "-inf"}
    return v


def encode(value: Any, _depth: int = 0) -> Any:
    """Turn a value into JSON-compatible data with type tags."""
    if _depth > 50:
        raise EncodeError("value is nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) is int:
        return value
    if type(value) is float:
        return {"$float": _float_out(value)} if not math.isfinite(value) else value
    if isinstance(value, np.generic):
        return {"$scalar": _dtype_name(value.dtype), "v": _float_out(value.item()) if isinstance(value.item(), float) else value.item()}
    if isinstance(value, tuple) and type(value) is tuple:
        return {"$tuple": [encode(v, _depth + 1) for v in value]}
    if type(value) is list:
        return [encode(v, _depth + 1) for v in value]
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {"$dict": {k: encode(v, _depth + 1) for k, v in value.items()}}
        return {"$pairs": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in value.items()]}
    lib = "numpy" if isinstance(value, np.ndarray) else _array_lib(value)
    if lib is not None:
        arr = np.asarray(value)
        if arr.dtype == object:
            raise EncodeError("object arrays are not plain data")
        if arr.size > MAX_ELEMENTS:
            raise EncodeError(f"array with {arr.size} elements is too large to return")
        name = _dtype_name(arr.dtype)
        flat = arr.astype(np.float64).ravel() if _is_low_float(arr.dtype) else arr.ravel()
        data = [_float_out(x) if isinstance(x, float) else x for x in flat.tolist()]
        return {"$array": name, "lib": lib, "shape": list(arr.shape), "data": data}
    raise EncodeError(f"cannot return a value of type {type(value).__module__}.{type(value).__qualname__}")


def _is_low_float(dtype) -> bool:
    # bfloat16 / float8 from ml_dtypes: tolist() gives odd scalars, go through float64.
    return np.dtype(dtype).kind == "V" or np.dtype(dtype).name.startswith(("bfloat16", "float8", "float4"))


def _array_lib(value) -> str | None:
    module = type(value).__module__ or ""
    if module.startswith(("jax", "jaxlib")) and hasattr(value, "shape") and hasattr(value, "dtype"):
        return "jax"
    return None


def _float_in(v):
    if isinstance(v, dict) and "$f" in v:
        return float(v["$f"])
    return v


def decode(data: Any) -> Any:
    """Inverse of :func:`encode`; JAX arrays come back as NumPy arrays (see :class:`Decoded`)."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "$float" in data:
        return float(_float_in(data["$float"]))
    if "$scalar" in data:
        return np.dtype(_load_dtype(data["$scalar"])).type(_float_in(data["v"]))
    if "$tuple" in data:
        return tuple(decode(v) for v in data["$tuple"])
    if "$dict" in data:
        return {k: decode(v) for k, v in data["$dict"].items()}
    if "$pairs" in data:
        return {_hashable(decode(k)): decode(v) for k, v in data["$pairs"]}
    if "$array" in data:
        dtype = _load_dtype(data["$array"])
        flat = [_float_in(x) for x in data["data"]]
        arr = np.array(flat, dtype=np.float64 if _is_low_float(dtype) else dtype).astype(dtype)
        arr = arr.reshape(data["shape"])
        return JaxArray(arr) if data.get("lib") == "jax" else arr
    raise ValueError(f"unknown tagged value: {sorted(data)}")


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _load_dtype(name: str):
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


class JaxArray(np.ndarray):
    """A NumPy array that remembers it was a ``jax.Array`` in the worker."""

    def __new__(cls, arr):
        return np.asarray(arr).view(cls)


def dumps(value: Any) -> str:
    return json.dumps(encode(value), allow_nan=False)


def loads(text: str) -> Any:
    return decode(json.loads(text))
