"""Unit 4's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py)."""

from tests.wrong_answers.unit1 import IMPORTS as UNIT1_IMPORTS

U4 = UNIT1_IMPORTS + """
import itertools
import json
import math
import os
"""

_HEADER = """
def parse_safetensors_header(path):
    size = os.path.getsize(path)
    if size < 8:
        raise ValueError("truncated file")
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), ORDER)
        if n > size - 8:
            raise ValueError("truncated file")
        raw = f.read(n)
    PARSE
    if not isinstance(header, dict):
        raise ValueError("corrupt header")
    DROP
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str) and isinstance(info.get("shape"), list)
                and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2):
            raise ValueError("corrupt header")
        if CHECK_DATA and 8 + n + info["data_offsets"][1] > size:
            raise ValueError("truncated file")
    return header, START
"""

_PARSE_OK = """try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise ValueError("corrupt header") from None"""


def _header(order='"little"', parse=_PARSE_OK, drop='header.pop("__metadata__", None)', check="True", start="8 + n"):
    return (_HEADER.replace("ORDER", order).replace("PARSE", parse).replace("DROP", drop)
            .replace("CHECK_DATA", check).replace("START", start))


HEADER = [
    ("keeps_metadata", _header(drop="pass"), "incorrect", "Leave \"__metadata__\" out"),
    ("data_start_without_the_8_bytes", _header(start="n"), "incorrect", "off by 8"),
    ("never_checks_the_data", _header(check="False"), "incorrect", "must raise ValueError"),
    ("lets_json_errors_through", _header(parse='header = json.loads(raw.decode("utf-8"))'), "incorrect",
     "Say what is wrong in the message"),
    ("big_endian_length", _header(order='"big"'), "error", "little-endian"),
    # Only what it reads next is checked: a dtype or shape of the wrong type passes.
    ("checks_only_the_offsets", _header().replace(
        'isinstance(info.get("dtype"), str) and isinstance(info.get("shape"), list)\n                and ', ""),
     "incorrect", "must raise ValueError"),
    # A tensor's end offset compared with the file's size as if it counted from byte 0.
    ("end_offsets_from_byte_zero", _header().replace('8 + n + info["data_offsets"][1] > size',
                                                      'info["data_offsets"][1] > size'),
     "incorrect", "must raise ValueError"),
    ("trusts_the_length", """
def parse_safetensors_header(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header, 8 + n
""", "error", "Ran out of memory"),
]

_RUNS = """
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    ndim = len(global_shape)
    if ndim == 0:
        return [(base, itemsize)]
    strides = [itemsize] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * global_shape[i + 1]
    k = ndim - 1
    while MERGE and k >= 0 and tuple(bounds[k]) == (0, global_shape[k]):
        k -= 1
    if k < 0:
        return [(base, strides[0] * global_shape[0])]
    length = (bounds[k][1] - bounds[k][0]) * strides[k]
    first = BASE + bounds[k][0] * strides[k]
    outer = itertools.product(*(range(start, stop) for start, stop in bounds[:k]))
    return SORT((first + sum(i * s for i, s in zip(index, strides)), length) for index in outer)
"""


def _runs(merge="True", base="base", sort="sorted"):
    return _RUNS.replace("MERGE", merge).replace("BASE", base).replace("SORT", sort)


RUNS = [
    ("runs_not_merged", _runs(merge="False"), "incorrect", "merge runs that touch"),
    ("column_major_runs", """
def index_domain_to_byte_runs(bounds, global_shape, itemsize, base):
    if not global_shape:
        return [(base, itemsize)]
    strides = [itemsize] * len(global_shape)
    for i in range(1, len(global_shape)):
        strides[i] = strides[i - 1] * global_shape[i - 1]
    k = 0
    while k < len(global_shape) and tuple(bounds[k]) == (0, global_shape[k]):
        k += 1
    if k == len(global_shape):
        return [(base, strides[-1] * global_shape[-1])]
    length = (bounds[k][1] - bounds[k][0]) * strides[k]
    first = base + bounds[k][0] * strides[k]
    outer = itertools.product(*(range(s, e) for s, e in bounds[k + 1:]))
    return sorted((first + sum(i * s for i, s in zip(idx, strides[k + 1:])), length) for idx in outer)
""", "incorrect", "column-major"),
    ("forgets_the_base", _runs(base="0"), "incorrect", "add base"),
    ("unsorted_runs", _runs(sort="(lambda g: sorted(g, reverse=True))"), "incorrect", "sorted by offset"),
    ("lists_not_tuples", _runs(sort="(lambda g: [list(r) for r in sorted(g)])"), "incorrect", "must be a tuple"),
]

_COALESCE = """
def coalesce_runs(runs, max_gap):
    reads = []
    for offset, length in ORDER(runs):
        if reads and offset - (reads[-1][0] + reads[-1][1]) GAP max_gap:
            start, size = reads[-1]
            reads[-1] = (start, END - start)
        else:
            reads.append((offset, length))
    return RESULT
"""


def _coalesce(order="sorted", gap="<=", end="max(start + size, offset + length)", result="reads"):
    return _COALESCE.replace("ORDER", order).replace("GAP", gap).replace("END", end).replace("RESULT", result)


COALESCE = [
    ("gap_off_by_one", _coalesce(gap="<"), "incorrect", "Off by one"),
    ("not_sorted_first", _coalesce(order="list"), "incorrect", "Sort the runs"),
    ("contained_run_shrinks_the_read", _coalesce(end="offset + length"), "incorrect", "must not shorten"),
    ("returns_start_end", _coalesce(result="[(s, s + n) for s, n in reads]"), "incorrect", "not (start, end)"),
]

_READ_SHARD = """
DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_shard(path, name, bounds):
    with open(path, "rb", buffering=0) as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    info = header[name]
    dtype = np.dtype(DTYPES[info["dtype"]])
    shape = info["shape"]
    base = START + info["data_offsets"][0]
    BODY
"""

_EXACT = """strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    out = []
    with open(path, "rb", buffering=BUFFERING) as f:
        for index in itertools.product(*(range(a, b) for a, b in bounds[:-1])):
            offset = base + sum(i * s for i, s in zip(index, strides)) + (bounds[-1][0] * dtype.itemsize if bounds else 0)
            f.seek(offset)
            out.append(f.read(((bounds[-1][1] - bounds[-1][0]) if bounds else 1) * dtype.itemsize))
    return np.frombuffer(b"".join(out), dtype).reshape(tuple(b - a for a, b in bounds))"""


_UNBUFFERED = _EXACT.replace("BUFFERING", "0")


def _read(start="8 + n", body=_UNBUFFERED):
    return _READ_SHARD.replace("START", start).replace("BODY", body)


READ_SHARD = [
    ("reads_the_whole_tensor", _read(body="""size = math.prod(shape) * dtype.itemsize
    with open(path, "rb") as f:
        f.seek(base)
        full = np.frombuffer(f.read(size), dtype).reshape(shape)
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "incorrect", "at least the whole tensor"),
    ("buffered_small_reads", _read(body=_EXACT.replace("BUFFERING", "-1")), "incorrect", "buffering=0"),
    ("memory_map", _read(body="""full = np.memmap(path, dtype=dtype, mode="r", offset=base, shape=tuple(shape))
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "error", "memory maps"),
    ("offsets_from_byte_zero", _read(start="0"), "incorrect", "data section"),
    ("forgets_the_tensors_offset", _read().replace(' + info["data_offsets"][0]', ""), "incorrect",
     "data_start + data_offsets[0]"),
    ("column_major", _read(body="""size = math.prod(shape) * dtype.itemsize
    with open(path, "rb", buffering=0) as f:
        f.seek(base)
        full = np.frombuffer(f.read(size), dtype).reshape(shape, order="F")
    return np.array(full[tuple(slice(a, b) for a, b in bounds)])"""), "incorrect", "column-major"),
    ("reads_one_contiguous_run", _read(body="""strides = [dtype.itemsize] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    with open(path, "rb", buffering=0) as f:
        f.seek(base + sum(a * s for (a, _), s in zip(bounds, strides)))
        data = f.read(math.prod(b - a for a, b in bounds) * dtype.itemsize)
    return np.frombuffer(data, dtype).reshape(tuple(b - a for a, b in bounds))"""), "incorrect", "one run per row"),
    ("bool_as_uint8", _read().replace('"BOOL": np.bool_', '"BOOL": np.uint8'), "incorrect", "own dtype"),
    ("always_float32", _read(body=_EXACT.replace("BUFFERING", "0").replace(
        "np.frombuffer(b\"\".join(out), dtype)", "np.frombuffer(b\"\".join(out), dtype).astype(np.float32)")),
     "incorrect", "own dtype"),
]

_PRESHARD = """
import itertools


def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates, devices_per_host):
    domains = real_index_domains(global_shape, mesh_shape, spec)
    reads = {}
    for name, chunk in candidates.items():
        hosts = {}
        for dev, dom in domains.items():
            hosts.setdefault(HOST, set()).update(
                itertools.product(*[range(s // c, -(-e // c)) for (s, e), c in zip(dom, chunk)]))
        chunks = sum(len(v) for v in hosts.values())
        reads[name] = READ
    return PICK, reads
"""


def _preshard(read="chunks * math.prod(chunk) * itemsize", pick="min(sorted(reads), key=lambda k: reads[k])",
              host="dev // devices_per_host"):
    return _PRESHARD.replace("READ", read).replace("PICK", pick).replace("HOST", host)


PRESHARD = [
    ("counts_needed_bytes", _preshard(
        read="sum(math.prod(e - s for s, e in d) for d in domains.values()) * itemsize"), "incorrect", "whole chunks"),
    ("forgets_itemsize", _preshard(read="chunks * math.prod(chunk)"), "incorrect", "multiply by itemsize"),
    ("picks_the_most", _preshard(pick="max(sorted(reads), key=lambda k: reads[k])"), "incorrect", "FEWEST"),
    ("ties_by_insertion_order", _preshard(pick="min(reads, key=lambda k: reads[k]) if len(set(reads.values())) > 1 "
                                               "else list(reads)[-1]"), "incorrect", "sorts first"),
    ("ignores_hosts", _preshard(host="dev"), "incorrect", "once per host"),
    ("one_read_in_all", _preshard(host="0"), "incorrect", "reads for itself"),
    # min over the dict itself: on a tie, the name given first, whether or not it sorts first.
    ("min_in_insertion_order", _preshard(pick="min(reads, key=reads.get)"), "incorrect", "sorts first"),
    # Index domains by hand, a tuple entry's axes taken last one most significant.
    ("last_axis_most_significant", _preshard().replace(
        "domains = real_index_domains(global_shape, mesh_shape, spec)", """sizes = list(mesh_shape.values())
    entries = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    entries += [()] * (len(global_shape) - len(entries))
    domains = {}
    for d in range(math.prod(sizes)):
        coords = dict(zip(mesh_shape, (int(i) for i in np.unravel_index(d, sizes))))
        dom = []
        for n, axes in zip(global_shape, entries):
            index, parts = 0, 1
            for a in reversed(axes):
                index, parts = index * mesh_shape[a] + coords[a], parts * mesh_shape[a]
            dom.append((index * (n // parts), (index + 1) * (n // parts)))
        domains[d] = dom"""), "incorrect", "the first axis of the tuple is the most significant"),
]

WRONG = {
    "parse_safetensors_header": HEADER,
    "index_domain_to_byte_runs": RUNS,
    "coalesce_runs": COALESCE,
    "read_shard": READ_SHARD,
    "best_presharding": PRESHARD,
}

IMPORTS = U4 + "from ckptlab.layout import real_index_domains\n"  # what these answers run with
