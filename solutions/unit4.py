"""Reference solutions for Unit 4: reading only a shard's bytes from a safetensors file, and
choosing a pre-sharded chunk shape.

Checked against the real libraries in tests: Orbax's own ``index_domain_to_byte_runs`` and
``_partition_runs``, the ``safetensors`` package's parser and slicing, and Orbax's safetensors
loader.
"""

from __future__ import annotations

import itertools
import json
import math
import os

import numpy as np

from ckptlab.layout import real_index_domains

SAFETENSORS_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}


def _is_int_list(v, length=None):
    return (type(v) is list and (length is None or len(v) == length)
            and all(type(x) is int and x >= 0 for x in v))


def parse_safetensors_header(path):
    size = os.path.getsize(path)
    if size < 8:
        raise ValueError(f"truncated file: {size} bytes, fewer than the 8 bytes of the header length")
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), "little")
        if n > size - 8:  # checked before reading: a corrupt length must not allocate n bytes
            raise ValueError(f"truncated file: the header should be {n} bytes, but only {size - 8} follow")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"corrupt header: not UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"corrupt header: a JSON {type(header).__name__}, not an object of tensors")
    header.pop("__metadata__", None)
    data_start = 8 + n
    for name, info in header.items():
        ok = (isinstance(info, dict) and isinstance(info.get("dtype"), str) and _is_int_list(info.get("shape"))
              and _is_int_list(info.get("data_offsets"), 2) and info["data_offsets"][0] <= info["data_offsets"][1])
        if not ok:
            raise ValueError(f"corrupt header: the entry for {name!r} lacks a dtype, shape or [begin, end] offsets")
        if data_start + info["data_offsets"][1] > size:
            raise ValueError(f"truncated file: tensor {name!r} ends at byte {data_start + info['data_offsets'][1]}, "
                             f"past the end of the file ({size} bytes)")
    return header, data_start


def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    ndim = len(global_shape)
    if ndim == 0:
        return [(base, itemsize)]
    strides = [itemsize] * ndim  # row-major: bytes between neighbours along each dimension
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * global_shape[i + 1]
    # Trailing dimensions taken in full are contiguous; the first one from the end that is not
    # taken in full ends each run, and every index of the dimensions before it starts one.
    k = ndim - 1
    while k >= 0 and tuple(bounds[k]) == (0, global_shape[k]):
        k -= 1
    if k < 0:
        return [(base, strides[0] * global_shape[0])]
    length = (bounds[k][1] - bounds[k][0]) * strides[k]
    first = base + bounds[k][0] * strides[k]
    outer = itertools.product(*(range(start, stop) for start, stop in bounds[:k]))
    return sorted((first + sum(i * s for i, s in zip(index, strides)), length) for index in outer)


def coalesce_runs(runs, max_gap):
    reads = []
    for offset, length in sorted(runs):
        if reads and offset - (reads[-1][0] + reads[-1][1]) <= max_gap:
            start, size = reads[-1]
            reads[-1] = (start, max(start + size, offset + length) - start)
        else:
            reads.append((int(offset), int(length)))
    return reads


def read_shard(path, name, bounds):
    header, data_start = parse_safetensors_header(path)
    info = header[name]
    dtype = np.dtype(SAFETENSORS_DTYPES[info["dtype"]])
    base = data_start + info["data_offsets"][0]
    runs = index_domain_to_byte_runs(bounds, info["shape"], dtype.itemsize, base)
    out = bytearray(sum(length for _, length in runs))
    view = memoryview(out)
    at = 0
    # Unbuffered: each read asks the OS for exactly these bytes, no read-ahead.
    with open(path, "rb", buffering=0) as f:
        for offset, length in runs:
            f.seek(offset)
            while length:
                got = f.readinto(view[at:at + length])
                if not got:
                    raise ValueError(f"truncated file: tensor {name!r} ends past the end of the file")
                at, length = at + got, length - got
    shape = tuple(stop - start for start, stop in bounds)
    return np.frombuffer(out, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    domains = real_index_domains(global_shape, mesh_shape, spec)
    reads = {}
    for name, chunk in candidates.items():
        per_host = {}  # host -> the chunks its devices overlap, each read once by that host
        for device, domain in domains.items():
            ranges = [range(start // c, -(-stop // c)) for (start, stop), c in zip(domain, chunk)]
            per_host.setdefault(device // devices_per_host, set()).update(itertools.product(*ranges))
        reads[name] = sum(len(chunks) for chunks in per_host.values()) * math.prod(chunk) * itemsize
    best = min(sorted(reads), key=lambda name: reads[name])
    return best, reads
