"""Hidden cases for Unit 4 (byte-range reads from safetensors, pre-sharding). Files are written by
the grader with the ``safetensors`` package, fresh for each learner."""

from __future__ import annotations

import itertools
import math

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.kinds import CORRUPT, TRUNCATED, SafetensorsArg
from ckptlab.layout import real_index_domains
from solutions.unit4 import coalesce_runs, index_domain_to_byte_runs

_NAMES = ("embed", "layers.0.attn.wq", "layers.0.mlp.wi_0", "layers.1.mlp.wo", "final_norm.scale", "lm_head")


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _seed(rng) -> int:
    return int(rng.integers(0, 2**31))


def _others(rng, n=2):
    """A few other tensors, so that the tensor under test does not start the data section."""
    dtypes = ("float32", "float16", "int8", "int32")
    return tuple((f"extra.{i}", (int(rng.integers(1, 9)), int(rng.integers(1, 9))), _pick(rng, dtypes))
                 for i in range(n))


# ---------------------------------------------------------------------------------------------
# 4.1 parse_safetensors_header

def _header_cases(rng):
    def file(tensors, metadata=(), damage=""):
        return (SafetensorsArg(tuple(tensors), _seed(rng), tuple(metadata), damage),)

    names = list(_NAMES)
    rng.shuffle(names)
    mixed = [(names[0], (16, 8), "float32"), (names[1], (8,), "float16"), (names[2], (4, 2, 3), "int8"),
             (names[3], (5,), "bool")]
    # Long names, a few bytes of data each: cut in its data, the file is still longer than any
    # tensor's end offset, which counts from the data section (8 + N), not from byte 0.
    tiny = [(f"layers.{i}.mlp.{names[5]}.bias", (2,), "int8") for i in range(6)]
    return [
        Case("mixed_dtypes", file(mixed)),
        Case("metadata", file(mixed[:2], (("format", "np"), ("step", str(int(rng.integers(1, 10**6))))))),
        Case("metadata", file([("step", (), "int64"), mixed[3]], (("format", "pt"),))),
        Case("scalar", file([("step", (), "int64"), (names[4], (3,), "float64")])),
        Case("many_tensors", file([(f"layers.{i}.w", (int(rng.integers(1, 6)), 4), "float32") for i in range(12)])),
        *[Case("truncated", file(mixed[:2], damage=d)) for d in TRUNCATED],
        Case("truncated", file(tiny, damage="data_cut")),
        *[Case("corrupt", file(mixed[:2], damage=d)) for d in CORRUPT],  # (bad_dtype, bad_shape: every field checked)
    ]


def _header_raise_ok(args, message: str) -> bool:
    damage = args[0].damage
    word = "truncated" if damage in TRUNCATED else "corrupt"
    return word in message.lower()


def _diagnose_header(args, actual, expected):
    if not (isinstance(actual, tuple) and len(actual) == 2 and isinstance(expected, tuple)):
        return None
    header, start = actual
    if isinstance(header, dict) and "__metadata__" in header:
        return "metadata"
    if start == expected[1] - 8:
        return "data_start"
    return None


HEADER = Hidden(
    generate=_header_cases,
    messages={
        "metadata": "Leave \"__metadata__\" out of the header you return: it describes the file, not a tensor.",
        "data_start": "data_start is off by 8: the data begins after the 8 length bytes AND the N header bytes.",
        "should_raise": "A truncated or corrupt file must raise ValueError, not return a header. Check the file's "
                        "size against the header length, and against every tensor's end offset.",
        "wrong_exception": "Raise ValueError (or a subclass) for a truncated or corrupt file.",
        "unclear_error": "Say what is wrong in the message: 'truncated' when the file ends too early (shorter than "
                         "8 bytes, than its header, or than a tensor's data), 'corrupt' when the header is not a "
                         "JSON object of well-formed entries. Catch the JSON or Unicode error and raise your own.",
        "mixed_dtypes": "Wrong on a file with tensors of several dtypes: return the header's entries as they are.",
        "scalar": "Wrong on a file holding a scalar: its shape is an empty list.",
        "many_tensors": "Wrong on a file with many tensors.",
        "truncated": "Wrong on a truncated file.",
        "corrupt": "Wrong on a file with a corrupt header.",
    },
    diagnose=_diagnose_header,
    type_diagnoses=("metadata",),
    check_raise=_header_raise_ok,
    requirements={
        "Return `(header, data_start)`": ("mixed_dtypes", "metadata", "scalar", "many_tensors"),
        "without `\"__metadata__\"`": ("metadata",),
        "entries exactly as in the JSON (lists stay lists)": ("mixed_dtypes", "metadata", "scalar", "many_tensors"),
        "Raise ValueError for a damaged file, with a message that says what is wrong": ("truncated", "corrupt"),
        "it must contain 'truncated' when the file ends too early (fewer than 8 bytes, fewer than N after them, or "
        "a tensor's data running past the end)": ("truncated",),
        "'corrupt' when the header is not UTF-8 JSON, not an object, or has an entry without a str dtype, a list "
        "shape and two [begin, end] offsets": ("corrupt",),
    },
    on_exception="The first 8 bytes are the header length N, a little-endian unsigned integer "
                 "(int.from_bytes(b, 'little')); the next N bytes are UTF-8 JSON. Check N against the file's "
                 "size before reading N bytes.",
)


# ---------------------------------------------------------------------------------------------
# 4.2 index_domain_to_byte_runs

def _shard(shape, dim, parts, i):
    """Bounds of shard i of ``parts`` along ``dim``; other dimensions whole."""
    size = shape[dim] // parts
    return tuple((i * size, (i + 1) * size) if d == dim else (0, n) for d, n in enumerate(shape))


def _runs_cases(rng):
    base = int(rng.integers(1, 5000))
    r, c = 8 * int(rng.integers(1, 5)), 8 * int(rng.integers(1, 5))
    i = int(rng.integers(0, 4))
    three = (4, 2 * int(rng.integers(1, 4)), 8)
    four = (2, 4, 4 * int(rng.integers(1, 3)), 6)
    return [
        Case("scalar", ((), (), 4, base)),
        Case("scalar", ((), (), _pick(rng, (2, 8)), int(rng.integers(5000, 10_000)))),
        Case("leading_dim", (_shard((r, c), 0, 4, i), (r, c), 4, base)),
        Case("whole_tensor", (((0, r), (0, c)), (r, c), 2, base)),
        Case("inner_dim", (_shard((r, c), 1, 4, i), (r, c), 4, base)),
        Case("inner_dim", (_shard((r, c), 1, 8, i), (r, c), 1, 0)),
        Case("block", (((r // 2, r), (c // 4, c // 2)), (r, c), 2, base)),
        Case("three_d", (_shard(three, 1, 2, 1), three, 4, base)),
        Case("three_d", (((1, 3), (0, three[1]), (2, 6)), three, 8, base)),
        Case("four_d", (_shard(four, 2, 4, i), four, 2, base)),
        Case("four_d", (((0, 1), (1, 3), (0, four[2]), (0, 6)), four, 1, base)),
        Case("one_byte", (_shard((r, c), 0, 8, i), (r, c), 1, base)),
        Case("single_element", (((1, 2), (3, 4)), (r, c), 2, base)),
    ]


def _runs_variant(bounds, shape, itemsize, base, mode):
    if mode == "column_major":
        return index_domain_to_byte_runs(tuple(reversed(bounds)), tuple(reversed(shape)), itemsize, base)
    if mode == "no_base":
        return index_domain_to_byte_runs(bounds, shape, itemsize, 0)
    if mode == "elements":
        return [(o, n // itemsize) for o, n in index_domain_to_byte_runs(bounds, shape, 1, base)]
    raise ValueError(mode)


def _diagnose_runs(args, actual, expected):
    bounds, shape, itemsize, base = args
    plain = [tuple(r) for r in actual] if isinstance(actual, list) else actual
    if isinstance(plain, list) and sorted(plain) == expected and plain != expected:
        return "unsorted"
    for mode in ("column_major", "no_base", "elements"):
        try:
            if plain == _runs_variant(bounds, shape, itemsize, base, mode) != expected:
                return mode
        except Exception:  # noqa: BLE001
            continue
    if isinstance(plain, list) and len(plain) > len(expected) and sum(n for _, n in plain) == sum(n for _, n in expected):
        return "unmerged"
    return None


RUNS = Hidden(
    generate=_runs_cases,
    messages={
        "unmerged": "Right bytes, too many runs: merge runs that touch. Trailing dimensions taken in full are "
                    "contiguous with the last partial one, so a leading-dimension shard is a single run.",
        "column_major": "The runs follow column-major order: safetensors stores tensors row-major (C order), so the "
                        "last dimension is the contiguous one.",
        "no_base": "Offsets must be absolute: add base (where the tensor starts in the file) to every offset.",
        "elements": "Lengths are in bytes: multiply element counts by itemsize.",
        "unsorted": "Return the runs sorted by offset.",
        "scalar": "Wrong on a scalar: its one element is a single run of itemsize bytes at base.",
        "leading_dim": "Wrong on a shard of the leading dimension: that is one contiguous run.",
        "whole_tensor": "Wrong when the shard is the whole tensor: one run of all its bytes.",
        "inner_dim": "Wrong on a shard of an inner dimension: one run per row, strided by the row's bytes.",
        "block": "Wrong on a 2-D block shard.",
        "three_d": "Wrong on a 3-D tensor.",
        "four_d": "Wrong on a 4-D tensor.",
        "one_byte": "Wrong with a 1-byte dtype.",
        "single_element": "Wrong on a shard of a single element.",
    },
    diagnose=_diagnose_runs,
    requirements={
        "stored row-major (C order)": ("leading_dim", "inner_dim", "block", "three_d", "four_d", "single_element"),
        "from byte `base` of a file": ("scalar", "leading_dim", "inner_dim", "block", "three_d", "four_d"),
        "`itemsize` bytes per element": ("scalar", "leading_dim", "whole_tensor", "block", "three_d"),
        "stop exclusive": ("inner_dim", "block", "three_d", "one_byte", "single_element"),
        "Return the bytes the shard occupies as a list of (offset, length) tuples, sorted by offset": (
            "inner_dim", "block", "three_d"),
        "with runs that touch merged": ("leading_dim", "whole_tensor"),
        "A scalar is `[(base, itemsize)]`": ("scalar",),
    },
    on_exception="bounds is a tuple of (start, stop) per dimension (empty for a scalar); return a list of "
                 "(offset, length) tuples.",
)


# ---------------------------------------------------------------------------------------------
# 4.3 coalesce_runs

def _coalesce_cases(rng):
    g = int(rng.integers(8, 200))
    o = int(rng.integers(0, 10_000))
    n = lambda: int(rng.integers(1, 100))  # noqa: E731
    strided = [(o + k * (64 + g), 64) for k in range(int(rng.integers(3, 9)))]
    far = [(o + k * (64 + g + 1), 64) for k in range(int(rng.integers(3, 9)))]
    shuffled = list(strided)
    rng.shuffle(shuffled)
    if shuffled == strided:  # (a shuffle may leave them in order: then the case would not be unsorted)
        shuffled[0], shuffled[1] = shuffled[1], shuffled[0]
    a, b = n(), n()
    return [
        Case("empty", ([], g)),
        Case("single", ([(o, n())], g)),
        Case("gap_equal", (strided, g)),
        Case("gap_over", (far, g)),
        Case("unsorted", (shuffled, g)),
        Case("touching", ([(o, a), (o + a, b)], 0)),
        Case("overlapping", ([(o, a + 10), (o + a, b + 20)], 0)),
        Case("contained", ([(o, 500), (o + 10, 20), (o + 600, 10)], 60)),
        # A run that reaches past the next one, then one inside the read: the read keeps its end.
        Case("contained", ([(o + 50, 200), (o, 100), (o + 60, 10)], 0)),
        Case("mixed", (sorted([(o, 16), (o + 16 + g, 8), (o + 10_000, 4), (o + 10_004 + g + 1, 4)],
                              key=lambda r: -r[0]), g)),
    ]


def _coalesce_variant(runs, max_gap, mode):
    if mode == "strict_gap":
        return coalesce_runs(runs, max_gap - 1) if max_gap > 0 else _strict_zero(runs)
    if mode == "unsorted":
        out = []
        for off, ln in runs:
            if out and 0 <= off - (out[-1][0] + out[-1][1]) <= max_gap:
                out[-1] = (out[-1][0], off + ln - out[-1][0])
            else:
                out.append((off, ln))
        return out
    if mode == "unsorted_any_gap":  # the right merge, in the order given: a run before the read merges into it
        out = []
        for off, ln in runs:
            if out and off - (out[-1][0] + out[-1][1]) <= max_gap:
                out[-1] = (out[-1][0], max(out[-1][0] + out[-1][1], off + ln) - out[-1][0])
            else:
                out.append((off, ln))
        return out
    if mode == "shrinks":
        out = []
        for off, ln in sorted(runs):
            if out and off - (out[-1][0] + out[-1][1]) <= max_gap:
                out[-1] = (out[-1][0], off + ln - out[-1][0])
            else:
                out.append((off, ln))
        return out
    if mode == "end_pairs":
        return [(s, s + ln) for s, ln in coalesce_runs(runs, max_gap)]
    raise ValueError(mode)


def _strict_zero(runs):
    out = []
    for off, ln in sorted(runs):
        if out and off - (out[-1][0] + out[-1][1]) < 0:
            out[-1] = (out[-1][0], max(out[-1][0] + out[-1][1], off + ln) - out[-1][0])
        else:
            out.append((off, ln))
    return out


def _diagnose_coalesce(args, actual, expected):
    runs, max_gap = args
    plain = [tuple(r) for r in actual] if isinstance(actual, list) else actual
    for mode in ("strict_gap", "shrinks", "end_pairs", "unsorted", "unsorted_any_gap"):
        if plain == _coalesce_variant(runs, max_gap, mode) != expected:
            return "unsorted" if mode.startswith("unsorted") else mode
    return None


COALESCE = Hidden(
    generate=_coalesce_cases,
    messages={
        "strict_gap": "Off by one: runs whose gap is exactly max_gap merge too (gap <= max_gap), and touching runs "
                      "(gap 0) always merge.",
        "shrinks": "A run inside the current read must not shorten it: the merged end is the larger of the two ends.",
        "end_pairs": "Return (offset, length) pairs, not (start, end).",
        "unsorted": "Sort the runs by offset before merging: they may come in any order.",
        "empty": "Wrong on an empty list of runs: there is nothing to read.",
        "single": "Wrong on a single run: it is read as it is.",
        "gap_equal": "Wrong when the gaps equal max_gap: they merge.",
        "gap_over": "Wrong when the gaps are one byte over max_gap: they stay separate reads.",
        "touching": "Wrong on runs that touch (gap 0).",
        "overlapping": "Wrong on overlapping runs: they merge into one read covering both.",
        "contained": "Wrong when one run lies inside another.",
        "mixed": "Wrong on a mix of near and far runs given in reverse order.",
    },
    diagnose=_diagnose_coalesce,
    requirements={
        "a list of (offset, length) tuples in any order": ("unsorted", "contained", "mixed"),
        "return the reads as a list of (offset, length) tuples sorted by offset": ("single", "gap_over", "contained", "mixed"),
        "covering every run": ("overlapping", "contained"),
        "merging a run into the current read when it overlaps it or the gap between them is at most `max_gap` bytes": (
            "gap_equal", "gap_over", "touching", "overlapping", "mixed"),
    },
    on_exception="runs is a list of (offset, length) tuples; return a sorted list of (offset, length) tuples.",
)


# ---------------------------------------------------------------------------------------------
# 4.4 read_shard: graded on values and on the bytes read (the kernel's count, read by the grader from outside).

def _shard_case(rng, category, shape, dtype, bounds, position="middle"):
    name = _pick(rng, _NAMES)
    before, after = _others(rng), _others(rng, 1)
    tensors = (before + ((name, shape, dtype),) + after) if position == "middle" else (((name, shape, dtype),) + after)
    return Case(category, (SafetensorsArg(tensors, _seed(rng)), name, bounds))


def _read_cases(rng):
    i = int(rng.integers(0, 16))
    big = (512, 512)  # 1 MiB in float32: a 16th of it is 64 KiB
    return [
        _shard_case(rng, "leading_dim", big, "float32", _shard(big, 0, 16, i)),
        _shard_case(rng, "inner_dim", big, "float32", _shard(big, 1, 16, i)),
        _shard_case(rng, "block", big, "float32", ((128 * (i % 4), 128 * (i % 4 + 1)), (128 * (i // 4), 128 * (i // 4 + 1)))),
        _shard_case(rng, "first_tensor", big, "float32", _shard(big, 0, 8, i % 8), position="first"),
        _shard_case(rng, "two_byte", (1024, 256), "float16", _shard((1024, 256), 1, 8, i % 8)),
        _shard_case(rng, "two_byte", (512, 512), "int16", _shard((512, 512), 0, 16, i)),
        _shard_case(rng, "one_byte", (1024, 512), "int8", _shard((1024, 512), 1, 16, i)),
        _shard_case(rng, "one_byte", (1024, 512), "uint8", _shard((1024, 512), 0, 16, i)),
        _shard_case(rng, "three_d", (16, 64, 128), "float32", _shard((16, 64, 128), 1, 8, i % 8)),
        _shard_case(rng, "four_d", (8, 4, 64, 64), "float16", _shard((8, 4, 64, 64), 2, 16, i)),
        _shard_case(rng, "bool", (64, 48), "bool", _shard((64, 48), 1, 4, i % 4)),
        _shard_case(rng, "bool", (1024, 512), "bool", _shard((1024, 512), 0, 16, i)),  # (a mask: half a MiB)
        _shard_case(rng, "scalar", (), "int64", ()),
        _shard_case(rng, "whole_tensor", (32, 16), "float64", ((0, 32), (0, 16))),
    ]


def _check_reads(args, out) -> str | None:
    read = out.get("read_bytes")
    if read is None:
        return "no_count"
    arg, name, bounds = args
    if read <= arg.read_budget(name, bounds):
        return None
    return "whole_tensor_read" if read >= arg.nbytes(name) else "over_read"


def _diagnose_read(args, actual, expected):
    if not isinstance(actual, np.ndarray) or not isinstance(expected, np.ndarray):
        return None
    if actual.dtype != expected.dtype:
        return "dtype"
    if actual.shape != expected.shape:
        return "transposed" if sorted(actual.shape) == sorted(expected.shape) and actual.size == expected.size else "shape"
    arg, name, bounds = args
    shape = tuple(arg.header()[name]["shape"])
    dtype, base, size = expected.dtype, arg.tensor_base(name), arg.nbytes(name)
    content = arg.content()
    full = np.frombuffer(content[base:base + size], dtype=dtype).reshape(shape)
    as_column_major = full.ravel().reshape(shape, order="F")  # the file's bytes read as Fortran order
    if shape and np.array_equal(actual, as_column_major[tuple(slice(a, b) for a, b in bounds)]):
        return "column_major"
    data_start = 8 + arg.header_size()
    if base != data_start and data_start + size <= len(content):  # data_offsets[0] left out
        wrong = np.frombuffer(content[data_start:data_start + size], dtype=dtype).reshape(shape)
        if np.array_equal(actual, wrong[tuple(slice(a, b) for a, b in bounds)]):
            return "tensor_offset"
    if bounds:  # the shard's bytes taken as one run from its first element, strides ignored
        strides = np.cumprod((1,) + shape[:0:-1])[::-1] * dtype.itemsize
        first = base + int(sum(a * st for (a, _), st in zip(bounds, strides)))
        if first + expected.nbytes <= len(content):
            run = np.frombuffer(content[first:first + expected.nbytes], dtype=dtype).reshape(expected.shape)
            if not np.array_equal(run, expected) and np.array_equal(actual, run):
                return "one_run"
    no_start = base - 8 - arg.header_size()
    if no_start + size <= len(content):
        wrong = np.frombuffer(content[no_start:no_start + size], dtype=dtype).reshape(shape)
        if np.array_equal(actual, wrong[tuple(slice(a, b) for a, b in bounds)]):
            return "data_start"
    return None


READ = Hidden(
    generate=_read_cases,
    messages={
        "no_count": "The grader could not count the bytes your function read: counting needs Linux "
                    "(/proc/<pid>/io). Grade on Linux, or in the course's Docker/CI environment.",
        "whole_tensor_read": "Right values, but your function read at least the whole tensor: read only the shard's "
                             "byte runs (problem 4.2), each with f.seek(offset) and f.read(length).",
        "over_read": "Right values, but your function read more bytes than the shard needs. If you read small runs "
                     "through a buffered file, every read fetches a whole buffer (the file's st_blksize, often 4 KiB): open the file with "
                     "open(path, 'rb', buffering=0), or read exactly the runs.",
        "dtype": "Return the tensor's own dtype: map the header's dtype string (F32, F16, I8, BOOL, ...) to NumPy.",
        "shape": "Return the shard with its shape: (stop - start) for each dimension.",
        "transposed": "The shard's dimensions come out in the wrong order: the tensor is row-major, reshape in C order.",
        "column_major": "The values are laid out column-major: safetensors is row-major (C order).",
        "data_start": "The values come from the wrong place: data_offsets count from the start of the data section, "
                      "which begins at 8 + N, not at byte 0.",
        "one_run": "The values are the shard's bytes read as one contiguous run from its first element: a shard of "
                   "an inner dimension is strided, one run per row. Read each of its byte runs (problem 4.2).",
        "tensor_offset": "The values come from the wrong place: a tensor starts at data_start + data_offsets[0]; "
                         "yours were read from where the data section starts, which holds another tensor's bytes.",
        "leading_dim": "Wrong on a shard of the leading dimension.",
        "inner_dim": "Wrong on a shard of an inner dimension (strided runs).",
        "block": "Wrong on a 2-D block shard.",
        "first_tensor": "Wrong on the first tensor of the file.",
        "two_byte": "Wrong with a 2-byte dtype.",
        "one_byte": "Wrong with a 1-byte dtype.",
        "three_d": "Wrong on a 3-D tensor.",
        "four_d": "Wrong on a 4-D tensor.",
        "bool": "Wrong on a BOOL tensor (1 byte per element).",
        "scalar": "Wrong on a scalar: bounds is (), the result has shape ().",
        "whole_tensor": "Wrong when the shard is the whole tensor.",
    },
    diagnose=_diagnose_read,
    check_outcome=_check_reads,
    requirements={
        "Return the shard `bounds` of tensor `name` in the safetensors file `path`": (
            "leading_dim", "inner_dim", "block", "two_byte", "three_d", "four_d"),
        "as a NumPy array with the tensor's dtype (F64, F32, F16, I64, I32, I16, I8, U8 or BOOL)": (
            "two_byte", "one_byte", "bool", "scalar", "whole_tensor"),
        "and shape (stop - start per dimension)": ("leading_dim", "inner_dim", "block", "three_d", "four_d"),
        "Read only the bytes the shard needs": (
            "leading_dim", "inner_dim", "block", "first_tensor", "two_byte", "one_byte", "three_d", "four_d"),
    },
    on_exception="If the error says memory maps are switched off: read with f.seek(offset) and f.read(length) "
                 "(np.memmap and safetensors.safe_open are off while grading). bounds is a tuple of (start, stop) "
                 "per dimension.",
)


# ---------------------------------------------------------------------------------------------
# 4.5 best_presharding

def _moe_cases(rng):
    e = _pick(rng, (16, 32))
    d = 64 * int(rng.integers(1, 3))
    shape = (e, 2, d, 16)
    ep = (e // 16, 2, d, 16)
    fsdp = (e, 2, d // 16, 16)
    both = (e // 4, 2, d // 4, 16)
    # Not in sorted order: on a tie (a replicated target reads the whole tensor, whatever the chunks)
    # the name that sorts first is not the one given first.
    cands = {"fsdp16": fsdp, "ep4_fsdp4": both, "ep16": ep}
    item = _pick(rng, (2, 4))
    hosts = lambda: _pick(rng, (2, 4, 8))  # noqa: E731 - devices per host
    return [
        Case("fsdp_target", (shape, item, {"x": 16}, (None, None, "x"), cands, hosts())),
        Case("ep_target", (shape, item, {"x": 16}, ("x",), cands, hosts())),
        Case("two_d_target", (shape, item, {"x": 4, "y": 4}, ("x", None, "y"), cands, hosts())),
        # (Two devices a host: x, the most significant, numbers the host; were y, a host's two devices
        # would hold shards 8 apart, in two fsdp8 chunks.)
        Case("finer_target", (shape, item, {"x": 8, "y": 2}, (None, None, ("x", "y")),
                              {"ep16": ep, "fsdp8": (e, 2, d // 8, 16)}, 2)),
        # Experts over ("y", "x"): y is the most significant, so a host's 4 devices (one x) hold experts
        # 4 apart, not 4 neighbours.
        Case("finer_target", (shape, item, {"x": 4, "y": 4}, (("y", "x"),), cands, 4)),
        Case("replicated_target", (shape, item, {"x": 16}, (), cands, hosts())),
        Case("partly_replicated", (shape, item, {"x": 8, "y": 2}, (None, None, "x"), cands, hosts())),
        Case("unaligned", ((48, 64), item, {"x": 16}, ("x",), {"rows8": (8, 64), "rows16": (16, 64), "cols16": (48, 4)},
                           hosts())),
        Case("one_device_per_host", (shape, item, {"x": 16}, (None, None, "x"), cands, 1)),
        Case("one_host", (shape, item, {"x": 16}, (None, None, "x"), cands, 16)),
    ]


def _preshard_variant(args, mode):
    shape, item, mesh, spec, cands, per_host = args
    doms = real_index_domains(shape, mesh, spec)
    if mode == "per_device":
        per_host = 1
    reads = {}
    for name, chunk in cands.items():
        hosts = {}
        for dev, dom in doms.items():
            key = 0 if mode == "one_read_total" else dev // per_host
            hosts.setdefault(key, set()).update(
                itertools.product(*[range(s // c, -(-e // c)) for (s, e), c in zip(dom, chunk)]))
        chunks = sum(len(v) for v in hosts.values())
        reads[name] = chunks * math.prod(chunk) * (1 if mode == "no_itemsize" else item)
        if mode == "needed":
            reads[name] = sum(math.prod(e - s for s, e in dom) for dom in doms.values()) * item
    if mode == "max":
        return max(sorted(reads), key=lambda k: reads[k]), reads
    return min(sorted(reads), key=lambda k: reads[k]), reads


def _diagnose_preshard(args, actual, expected):
    if not (isinstance(actual, tuple) and len(actual) == 2):
        return None
    matches = set()  # a mistake is named only where exactly one model of a mistake explains the case
    for mode in ("needed", "no_itemsize", "per_device", "one_read_total", "max"):
        try:
            if actual == _preshard_variant(args, mode) != expected:
                matches.add(mode)
        except Exception:  # noqa: BLE001
            continue
    if len(matches) == 1:
        return matches.pop()
    if isinstance(actual[1], dict) and actual[1] == expected[1] and actual[0] != expected[0]:
        return "tie"
    return None


PRESHARD = Hidden(
    generate=_moe_cases,
    messages={
        "needed": "Count whole chunks: a host reads every saved chunk its devices' slices overlap, in full, not "
                  "just the bytes it needs. That over-read is what pre-sharding removes.",
        "no_itemsize": "Bytes, not elements: multiply by itemsize.",
        "per_device": "Count each chunk once per host: the devices of one host (device // devices_per_host) share "
                      "one read of it.",
        "one_read_total": "Each host reads for itself: a chunk that two hosts need is read by both.",
        "partly_replicated": "Wrong when the target uses only some mesh axes: devices differing only along the "
                             "others hold the same slice and need the same chunks.",
        "one_device_per_host": "Wrong with one device per host: each device then reads every chunk it overlaps.",
        "one_host": "Wrong with every device on one host: the host reads each chunk it needs once.",
        "max": "The best layout is the one with the FEWEST bytes read.",
        "tie": "Right byte counts, wrong choice: on a tie, pick the name that sorts first.",
        "fsdp_target": "Wrong for a target that shards the hidden dimension (FSDP).",
        "ep_target": "Wrong for a target that shards the experts (EP).",
        "two_d_target": "Wrong on a 2-D target mesh.",
        "finer_target": "Wrong when the target shards one dimension over two mesh axes: the first axis of the tuple "
                        "is the most significant.",
        "replicated_target": "Wrong on a replicated target: every host reads the whole tensor, whatever the chunks.",
        "unaligned": "Wrong when the target's slices do not line up with the chunks: a partly covered chunk is "
                     "read whole.",
    },
    diagnose=_diagnose_preshard,
    requirements={
        "by hosts of `devices_per_host` devices each (device d on host d // devices_per_host)": (
            "fsdp_target", "ep_target", "two_d_target", "finer_target", "partly_replicated", "one_host"),
        "a host reads each chunk its devices overlap once, whole": (
            "fsdp_target", "ep_target", "two_d_target", "finer_target", "replicated_target", "unaligned"),
        "`reads` maps each candidate's name to the bytes all hosts read together (an int)": (
            "fsdp_target", "ep_target", "two_d_target", "finer_target", "replicated_target", "one_device_per_host"),
        "`best` is the name with the fewest": ("fsdp_target", "ep_target", "two_d_target", "unaligned", "one_device_per_host"),
        "on a tie, the name that sorts first": ("replicated_target", "one_host"),
        "devices are numbered row-major over the mesh (`np.arange(n).reshape(sizes)`)": (
            "two_d_target", "finer_target", "partly_replicated"),
        "a tuple of axis names (the first one most significant)": ("finer_target",),
    },
    on_exception="candidates maps a name to a chunk shape; return (best_name, {name: bytes read by all hosts}).",
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "parse_safetensors_header": HEADER,
    "index_domain_to_byte_runs": RUNS,
    "coalesce_runs": COALESCE,
    "read_shard": READ,
    "best_presharding": PRESHARD,
}
