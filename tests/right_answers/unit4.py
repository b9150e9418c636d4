"""Unit 4's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit4.py."""

from autograder.units.unit4 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

RIGHT = {
    "parse_safetensors_header": [
        # struct.unpack('<Q') on a buffered file, the size from seeking to its end, each entry checked
        # by a helper that says what is wrong with it.
        ("struct_unpack", '''
import struct


def _entry_problem(info):
    if not isinstance(info, dict):
        return "not an object"
    if not isinstance(info.get("dtype"), str):
        return "no str dtype"
    shape = info.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        return "no list shape"
    offsets = info.get("data_offsets")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]):
        return "no [begin, end] offsets"
    return None


def parse_safetensors_header(path):
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(0)
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("truncated: the file is shorter than its 8-byte length prefix")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise ValueError(f"truncated: a header of {n} bytes is announced, {size - 8} follow")
        text = f.read(n)
    try:
        header = json.loads(text.decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        raise ValueError(f"corrupt header: {e}") from None
    if type(header) is not dict:
        raise ValueError("corrupt header: not a JSON object")
    header.pop("__metadata__", None)
    for name, info in header.items():
        problem = _entry_problem(info)
        if problem:
            raise ValueError(f"corrupt header: {name}: {problem}")
        if 8 + n + info["data_offsets"][1] > size:
            raise ValueError(f"truncated: the data of {name} runs past the end of the file")
    return header, 8 + n
'''),
        # The whole file read at once (pathlib), the length decoded with NumPy as a '<u8', and the
        # checks written as one generator of complaints.
        ("whole_file_numpy", '''
import pathlib


def _complaints(header, data_start, size):
    if not isinstance(header, dict):
        yield "corrupt header: not an object"
        return
    for name, info in header.items():
        ok = (isinstance(info, dict) and type(info.get("dtype")) is str
              and type(info.get("shape")) is list and all(type(x) is int and x >= 0 for x in info["shape"])
              and type(info.get("data_offsets")) is list and len(info["data_offsets"]) == 2
              and all(type(x) is int and x >= 0 for x in info["data_offsets"])
              and info["data_offsets"][0] <= info["data_offsets"][1])
        if not ok:
            yield f"corrupt entry {name!r}"
        elif data_start + info["data_offsets"][1] > size:
            yield f"truncated data of {name!r}"


def parse_safetensors_header(path):
    blob = pathlib.Path(path).read_bytes()
    if len(blob) < 8:
        raise ValueError("truncated file: no 8-byte header length")
    n = int(np.frombuffer(blob, dtype="<u8", count=1)[0])
    data_start = 8 + n
    if data_start > len(blob):
        raise ValueError("truncated file: the header runs past the end")
    try:
        header = json.loads(str(blob[8:data_start], "utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("corrupt header: not UTF-8 JSON") from None
    if isinstance(header, dict):
        header = {k: v for k, v in header.items() if k != "__metadata__"}
    for complaint in _complaints(header, data_start, len(blob)):
        raise ValueError(complaint)
    return header, data_start
'''),
        # The safetensors library's own reader does the checking (safe_open); its entries are rebuilt
        # from offset_keys, get_shape and get_dtype, and only the 8-byte length is read by hand.
        ("safetensors_library", '''
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2,
             "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def parse_safetensors_header(path):
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="np") as f:
            order = f.offset_keys()
            entries = {name: (f.get_slice(name).get_dtype(), list(f.get_slice(name).get_shape())) for name in order}
    except SafetensorError as e:
        text = str(e)
        if any(w in text for w in ("header too small", "header too large", "invalid header length",
                                   "incomplete metadata")):
            raise ValueError(f"truncated file ({text})") from None
        raise ValueError(f"corrupt header ({text})") from None
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    header, at = {}, 0
    for name in order:
        dtype, shape = entries[name]
        end = at + math.prod(shape) * _ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, end]}
        at = end
    return header, 8 + n
'''),
        # A memory map of the file (allowed here: only 4.4 switches maps off), the length taken with
        # struct.unpack_from, the checks raised from a table of (test, message) pairs.
        ("mmap_unpack_from", '''
import mmap
import struct


def parse_safetensors_header(path):
    size = os.stat(path).st_size
    if size < 8:
        raise ValueError("truncated: shorter than the 8-byte header length")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        (n,) = struct.unpack_from("<Q", m, 0)
        if n > size - 8:
            raise ValueError("truncated: the header is longer than the rest of the file")
        raw = m[8:8 + n]
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"corrupt header: {type(e).__name__}") from None
    if not isinstance(header, dict):
        raise ValueError("corrupt header: a JSON " + type(header).__name__)
    header.pop("__metadata__", None)

    def whole(x):
        return type(x) is int and x >= 0

    for name, e in header.items():
        checks = [
            (isinstance(e, dict), "corrupt entry: not an object"),
            (isinstance(e, dict) and type(e.get("dtype")) is str, "corrupt entry: dtype"),
            (isinstance(e, dict) and type(e.get("shape")) is list and all(map(whole, e["shape"])), "corrupt entry: shape"),
            (isinstance(e, dict) and type(e.get("data_offsets")) is list and len(e["data_offsets"]) == 2
             and all(map(whole, e["data_offsets"])) and e["data_offsets"][0] <= e["data_offsets"][1],
             "corrupt entry: data_offsets"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"{message} ({name})")
        if 8 + n + e["data_offsets"][1] > size:
            raise ValueError(f"truncated: {name} runs past the end of the file")
    return header, 8 + n
'''),
    ],
    "index_domain_to_byte_runs": [
        # A recursive walk over the dimensions: a dimension whose inner ones are all whole ends the
        # recursion with one run.
        ("recursive_walk", '''
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    shape = [int(n) for n in global_shape]
    bounds = [(int(a), int(b)) for a, b in bounds]
    strides = [itemsize * math.prod(shape[d + 1:]) for d in range(len(shape))]

    def whole_from(d):
        return all(bounds[e] == (0, shape[e]) for e in range(d, len(shape)))

    def walk(d, offset):
        if d == len(shape):
            return [(offset, itemsize)]
        start, stop = bounds[d]
        if whole_from(d + 1):
            return [(offset + start * strides[d], (stop - start) * strides[d])]
        runs = []
        for i in range(start, stop):
            runs += walk(d + 1, offset + i * strides[d])
        return runs

    return sorted(walk(0, base))
'''),
        # One run per innermost row with np.ndindex and np.ravel_multi_index, then rows that touch
        # merged into one.
        ("ndindex_rows_merged", '''
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    if len(global_shape) == 0:
        return [(base, itemsize)]
    *outer, (lo, hi) = [tuple(b) for b in bounds]
    row_bytes = (hi - lo) * itemsize
    runs = []
    for index in np.ndindex(*[b - a for a, b in outer]):
        full = tuple(a + i for (a, _), i in zip(outer, index)) + (lo,)
        flat = int(np.ravel_multi_index(full, tuple(global_shape)))
        runs.append([base + flat * itemsize, row_bytes])
    runs.sort()
    merged = []
    for offset, length in runs:
        if merged and merged[-1][0] + merged[-1][1] == offset:
            merged[-1][1] += length
        else:
            merged.append([offset, length])
    return [(offset, length) for offset, length in merged]
'''),
        # Orbax's own helper (its v1 safetensors layout), given the bounds as tuples of ints as it
        # expects them.
        ("orbax_helper", '''
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    from orbax.checkpoint.experimental.v1._src.layout import safetensors_layout

    runs = safetensors_layout.index_domain_to_byte_runs(
        tuple((int(start), int(stop)) for start, stop in bounds),
        tuple(int(n) for n in global_shape), int(itemsize), int(base))
    return [(int(offset), int(length)) for offset, length in runs]
'''),
        # Vectorised with NumPy: the run starts of all outer indices at once, by broadcasting.
        ("numpy_broadcast", '''
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    shape = np.array(global_shape, dtype=np.int64)
    if shape.size == 0:
        return [(base, itemsize)]
    strides = itemsize * np.concatenate([np.cumprod(shape[::-1])[::-1][1:], [1]])
    k = len(shape) - 1
    while k >= 0 and tuple(bounds[k]) == (0, int(shape[k])):
        k -= 1
    if k < 0:
        return [(base, int(shape.prod()) * itemsize)]
    starts = np.array([base + bounds[k][0] * int(strides[k])], dtype=np.int64)
    for d in range(k):
        steps = np.arange(bounds[d][0], bounds[d][1], dtype=np.int64) * strides[d]
        starts = (starts[:, None] + steps[None, :]).ravel()
    length = (bounds[k][1] - bounds[k][0]) * int(strides[k])
    return [(int(s), length) for s in np.sort(starts)]
'''),
    ],
    "coalesce_runs": [
        # Vectorised with NumPy: the running maximum of the ends (np.maximum.accumulate) says where
        # a gap larger than max_gap starts a new read.
        ("numpy_running_max", '''
def coalesce_runs(runs, max_gap):
    if not runs:
        return []
    a = np.array(sorted((int(o), int(n)) for o, n in runs), dtype=np.int64)
    starts, ends = a[:, 0], a[:, 0] + a[:, 1]
    reach = np.maximum.accumulate(ends)
    new = np.ones(len(a), dtype=bool)
    new[1:] = starts[1:] - reach[:-1] > max_gap
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(a)) - 1
    return [(int(starts[i]), int(reach[j] - starts[i])) for i, j in zip(first, last)]
'''),
        # Orbax's own _partition_runs with min_coalesce_gap=max_gap and a ratio of 1.0; overlapping
        # bytes are clipped first, so that its ratio (which counts them twice) never merges a gap.
        ("orbax_partition_runs", '''
def coalesce_runs(runs, max_gap):
    from orbax.checkpoint.experimental.v1._src.layout.safetensors_layout import _partition_runs

    clipped, reach = [], None
    for offset, length in sorted((int(o), int(n)) for o, n in runs):
        end = offset + length
        if reach is not None and offset < reach:
            if end <= reach:
                continue  # inside what the runs before it cover
            offset = reach
        clipped.append((offset, end - offset))
        reach = end if reach is None else max(reach, end)
    blocks = _partition_runs(clipped, max_over_read_ratio=1.0, min_coalesce_gap=max_gap)
    return [(block.start, block.end - block.start) for block in blocks]
'''),
        # A heap: runs popped in offset order, the current read kept as [start, end].
        ("heap_sweep", '''
def coalesce_runs(runs, max_gap):
    import heapq

    heap = [(int(o), int(o) + int(n)) for o, n in runs]
    heapq.heapify(heap)
    reads = []
    while heap:
        start, end = heapq.heappop(heap)
        while heap and heap[0][0] - end <= max_gap:
            _, other_end = heapq.heappop(heap)
            end = max(end, other_end)
        reads.append((start, end - start))
    return reads
'''),
    ],
    "read_shard": [
        # os.open and os.pread (no file object, no seek), the header parsed with struct.
        ("os_pread", '''
import struct

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "BOOL": "?"}


def _pread_exactly(fd, length, offset):
    parts = []
    while length:
        piece = os.pread(fd, length, offset)
        if not piece:
            raise ValueError("truncated file")
        parts.append(piece)
        offset, length = offset + len(piece), length - len(piece)
    return b"".join(parts)


def read_shard(path, name, bounds):
    fd = os.open(path, os.O_RDONLY)
    try:
        (n,) = struct.unpack("<Q", _pread_exactly(fd, 8, 0))
        info = json.loads(_pread_exactly(fd, n, 8))[name]
        dtype = np.dtype(DTYPES[info["dtype"]])
        shape = info["shape"]
        strides = [dtype.itemsize * math.prod(shape[d + 1:]) for d in range(len(shape))]
        base = 8 + n + info["data_offsets"][0]
        out_shape = tuple(b - a for a, b in bounds)
        if not shape:
            return np.frombuffer(_pread_exactly(fd, dtype.itemsize, base), dtype).reshape(()).astype(dtype.newbyteorder("="))
        # one read per row of the last dimension, rows merged where they are contiguous
        runs = []
        for index in itertools.product(*(range(a, b) for a, b in bounds[:-1])):
            offset = base + sum(i * s for i, s in zip(index, strides)) + bounds[-1][0] * strides[-1]
            length = (bounds[-1][1] - bounds[-1][0]) * strides[-1]
            if runs and runs[-1][0] + runs[-1][1] == offset:
                runs[-1][1] += length
            else:
                runs.append([offset, length])
        data = b"".join(_pread_exactly(fd, length, offset) for offset, length in runs)
    finally:
        os.close(fd)
    return np.frombuffer(data, dtype).astype(dtype.newbyteorder("=")).reshape(out_shape)
'''),
        # f.seek and f.read pieces joined with b''.join, as the hints say, with problems 4.1 and 4.2
        # written as helpers of their own (a recursive walk for the runs).
        ("seek_read_join", '''
NUMPY = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
         "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def _header(f):
    n = int.from_bytes(f.read(8), "little")
    return json.loads(f.read(n).decode("utf-8")), 8 + n


def _runs(bounds, shape, itemsize, base):
    if not shape:
        return [(base, itemsize)]
    (start, stop), inner = bounds[0], shape[1:]
    row = itemsize * math.prod(inner)
    if all(tuple(b) == (0, n) for b, n in zip(bounds[1:], inner)):
        return [(base + start * row, (stop - start) * row)]
    out = []
    for i in range(start, stop):
        out += _runs(bounds[1:], inner, itemsize, base + i * row)
    return out


def read_shard(path, name, bounds):
    with open(path, "rb", buffering=0) as f:
        header, data_start = _header(f)
        info = header[name]
        dtype = np.dtype(NUMPY[info["dtype"]])
        pieces = []
        for offset, length in _runs(list(bounds), list(info["shape"]), dtype.itemsize,
                                    data_start + info["data_offsets"][0]):
            f.seek(offset)
            piece = f.read(length)
            while len(piece) < length:
                more = f.read(length - len(piece))
                if not more:
                    raise ValueError("truncated file")
                piece += more
            pieces.append(piece)
    return np.frombuffer(b"".join(pieces), dtype=dtype).reshape([b - a for a, b in bounds])
'''),
        # Reads straight into the result: an np.empty array of the shard's shape, each run read
        # with readinto into the matching slice of its bytes (no intermediate buffer).
        ("readinto_numpy", '''
KINDS = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32",
         "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


def read_shard(path, name, bounds):
    with open(path, "rb", buffering=0) as f:
        size = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(size))[name]
        dtype = np.dtype(KINDS[meta["dtype"]])
        shape = tuple(meta["shape"])
        out = np.empty(tuple(b - a for a, b in bounds), dtype=dtype)
        raw = memoryview(out.reshape(-1).view(np.uint8))
        first = 8 + size + meta["data_offsets"][0]
        # the last dimension that is not taken whole, and everything from there on is contiguous
        k = len(shape) - 1
        while k >= 0 and tuple(bounds[k]) == (0, shape[k]):
            k -= 1
        if k < 0:
            spans = [(first, out.nbytes)]
        else:
            elems = math.prod(shape[k + 1:])
            run = (bounds[k][1] - bounds[k][0]) * elems * dtype.itemsize
            spans = []
            for index in np.ndindex(*[b - a for a, b in bounds[:k]]):
                at = tuple(a + i for (a, _), i in zip(bounds[:k], index)) + (bounds[k][0],) + (0,) * (len(shape) - k - 1)
                spans.append((first + int(np.ravel_multi_index(at, shape)) * dtype.itemsize, run))
        done = 0
        for offset, length in spans:
            f.seek(offset)
            end = done + length
            while done < end:
                got = f.readinto(raw[done:end])
                if not got:
                    raise ValueError("truncated file")
                done += got
    return out
'''),
    ],
    "best_presharding": [
        # No JAX: device coordinates from np.unravel_index, a host's chunks in a set, the best
        # picked by sorting (bytes, name) pairs.
        ("pure_python_hosts", '''
def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    names, sizes = list(mesh_shape), list(mesh_shape.values())
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    entries += [()] * (len(global_shape) - len(entries))
    boxes = {}
    for device in range(math.prod(sizes)):
        where = dict(zip(names, (int(c) for c in np.unravel_index(device, sizes))))
        box = []
        for n, axes in zip(global_shape, entries):
            index, count = 0, 1
            for a in axes:
                index, count = index * mesh_shape[a] + where[a], count * mesh_shape[a]
            box.append((index * (n // count), (index + 1) * (n // count)))
        boxes[device] = box
    reads = {}
    for cname, chunk in candidates.items():
        hosts = {}
        for device, box in boxes.items():
            ranges = [range(a // c, (b - 1) // c + 1) for (a, b), c in zip(box, chunk)]
            hosts.setdefault(device // devices_per_host, set()).update(itertools.product(*ranges))
        reads[cname] = int(sum(len(s) for s in hosts.values()) * math.prod(chunk) * itemsize)
    ranking = sorted((count, cname) for cname, count in reads.items())
    return ranking[0][1], reads
'''),
        # JAX's devices_indices_map on a real mesh, and each host's chunks marked in a boolean mask
        # of the candidate's chunk grid.
        ("jax_grid_masks", '''
def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    index_map = NamedSharding(mesh, PartitionSpec(*spec)).devices_indices_map(tuple(global_shape))
    boxes = {d.id: [sl.indices(g)[:2] for sl, g in zip(idx, global_shape)] for d, idx in index_map.items()}
    reads = {}
    for cname, chunk in candidates.items():
        grid = tuple(g // c for g, c in zip(global_shape, chunk))
        masks = {}
        for device, box in boxes.items():
            mask = masks.setdefault(device // devices_per_host, np.zeros(grid, dtype=bool))
            mask[tuple(slice(a // c, -(-b // c)) for (a, b), c in zip(box, chunk))] = True
        reads[cname] = sum(int(m.sum()) for m in masks.values()) * math.prod(chunk) * itemsize
    best = None
    for cname in sorted(reads):
        if best is None or reads[cname] < reads[best]:
            best = cname
    return best, reads
'''),
        # Problems 3.1 and 3.2 reused: a chunks_to_read helper built on JAX's shard_shape, each
        # host's chunks joined with set.union, ties broken by (bytes, name) in min.
        ("reuse_chunks_to_read", '''
def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    count = math.prod(mesh_shape.values())
    mesh = Mesh(np.array(jax.devices()[:count]).reshape(tuple(mesh_shape.values())), tuple(mesh_shape))
    shard = NamedSharding(mesh, PartitionSpec(*spec)).shard_shape(tuple(global_shape))
    spec = tuple(spec) + (None,) * (len(global_shape) - len(spec))
    result = {}
    for coords, device in np.ndenumerate(mesh.devices):
        where = dict(zip(mesh.axis_names, coords))
        ranges = []
        for entry, s, c in zip(spec, shard, chunk_shape):
            k = 0
            for a in (() if entry is None else (entry,) if isinstance(entry, str) else entry):
                k = k * mesh.shape[a] + int(where[a])
            ranges.append(range(k * s // c, ((k + 1) * s - 1) // c + 1))
        result[device.id] = list(itertools.product(*ranges))
    return result


def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    import functools

    reads = {}
    for cname, chunk in candidates.items():
        per_device = chunks_to_read(global_shape, chunk, mesh_shape, spec)
        hosts = {}
        for device, chunks in per_device.items():
            hosts.setdefault(device // devices_per_host, []).append(set(chunks))
        distinct = sum(len(functools.reduce(set.union, sets)) for sets in hosts.values())
        reads[cname] = distinct * math.prod(chunk) * itemsize
    best = min(reads.items(), key=lambda item: (item[1], item[0]))[0]
    return best, reads
'''),
    ],
}
