"""Unit 4, Reading only a shard's bytes, and pre-sharding: its record and its problems. Public: what learners may see (statements,
signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit4.py``, keyed by function
name; references: ``solutions/unit4.py``."""

from __future__ import annotations

from autograder.declarations import CONVENTIONS, Example, Problem, Unit
from autograder.wall.kinds import SafetensorsArg
from autograder.wall.problem_returns import SafetensorsShard
from autograder.wall.reads import READ_SLACK
from autograder.wall.returns import Raises, Struct

UNIT = Unit(
    number=4,
    title="Reading only a shard's bytes, and pre-sharding",
    intro=(
        "Load a safetensors file the way Orbax does: parse its header, turn a shard's "
        'index domain into byte runs, coalesce them into reads, and read exactly those '
        'bytes (the grader counts them). Then choose the pre-sharded chunk shape that '
        'makes a target mesh load fastest. The lesson is '
        '`course/04_shard_reads_and_presharding.ipynb`.'
    ),
    notebook='unit4_shard_reads_and_presharding.ipynb',
    lesson='04_shard_reads_and_presharding.ipynb',
    lesson_figures=3,
    # the problem notebook's import cell
    imports=(
        'import itertools\n'
        'import json\n'
        'import math\n'
        'import os\n'
        '\n'
        'import numpy as np\n'
        '\n'
        'from autograder.notebook import problem'
    ),
)

_EXAMPLE_FILE = SafetensorsArg((("embed", (8, 4), "float32"), ("norm.scale", (4,), "float16")), 0, (("format", "np"),))
_ENTRY = ("record", (("dtype", "str"), ("shape", ("list", "int")), ("data_offsets", ("list", "int"))))
_RUNS = ("list", ("fixed", ("int", "int")))
_MOE = {"ep16": (1, 2, 64, 16), "fsdp16": (16, 2, 4, 16)}

PROBLEMS = (
    Problem(
        id="4.1",
        function="parse_safetensors_header",
        signature=("path",),
        points=10,
        title="Parse a safetensors header",
        statement=(
            "A safetensors file starts with 8 bytes: N, the header's length, a little-endian unsigned "
            "integer. Then come N bytes of UTF-8 JSON mapping each tensor's name to `{\"dtype\", \"shape\", "
            "\"data_offsets\": [begin, end]}` (offsets relative to the data section), plus an optional "
            "`\"__metadata__\"` entry. The data section starts at byte 8 + N. Return `(header, data_start)`: "
            "the header as a dict, without `\"__metadata__\"`, entries exactly as in the JSON (lists stay "
            "lists), and `data_start` as an int. Raise ValueError for a damaged file, with a message that "
            "says what is wrong: it must contain 'truncated' when the file ends too early (fewer than 8 "
            "bytes, fewer than N after them, or a tensor's data running past the end), and 'corrupt' when "
            "the header is not UTF-8 JSON, not an object, or has an entry without a str dtype, a list shape "
            "and two [begin, end] offsets."
        ),
        returns=Struct(("fixed", (("dict", "str", _ENTRY), "int"))),
        hints=(
            "`n = int.from_bytes(f.read(8), 'little')`; compare n with `os.path.getsize(path) - 8` BEFORE "
            "reading n bytes: a damaged length can claim a terabyte.",
            "`json.loads(raw.decode('utf-8'))` raises UnicodeDecodeError or json.JSONDecodeError on garbage: "
            "catch both and raise `ValueError('corrupt header: ...')`. Then check it is a dict and pop "
            "`'__metadata__'`.",
            "For each entry check the dtype, shape and offsets, and that `8 + n + end <= file size` "
            "(else 'truncated'). data_start is `8 + n`: the header is padded with spaces, so it is not "
            "just the JSON's length.",
        ),
        examples=(
            Example((_EXAMPLE_FILE,),
                    ({"embed": {"dtype": "F32", "shape": [8, 4], "data_offsets": [0, 128]},
                      "norm.scale": {"dtype": "F16", "shape": [4], "data_offsets": [128, 136]}}, 168),
                    "written with safetensors.numpy.save_file: a 160-byte header, padded to a multiple of 8"),
            Example((SafetensorsArg(_EXAMPLE_FILE.tensors, 0, (), "header_cut"),), Raises("ValueError", word="truncated"),
                    "the file was cut in the middle of its header"),
            Example((SafetensorsArg(tuple((f"layers.{i}.self_attn.q_norm.bias", (2,), "int8") for i in range(4)), 1, (),
                                    "data_cut"),), Raises("ValueError", word="truncated"),
                    "four 2-byte tensors with long names, the file cut inside its data: the last tensor's end offset "
                    "counts from the data section, 8 + N, not from byte 0"),
            Example((SafetensorsArg(_EXAMPLE_FILE.tensors, 0, (), "bad_json"),), Raises("ValueError", word="corrupt"),
                    "a header that is not JSON: your own ValueError, saying 'corrupt'"),
            Example((SafetensorsArg(_EXAMPLE_FILE.tensors, 0, (), "bad_dtype"),), Raises("ValueError", word="corrupt"),
                    "an entry whose dtype is not a string: every field of an entry checked, not only its offsets"),
        ),
        raises=("ValueError",),
        difficulty="easy",
        category="formats",
        tags=("safetensors", "format"),
        why=(
            "A safetensors file describes itself: 8 bytes of little-endian length, a JSON header, then raw "
            "row-major data, so every tensor's dtype, shape and offsets are known after 8 + N bytes. Checking N "
            "against the file's size first keeps a damaged length from a huge read."
        ),
        next_question=(
            "Why is a safetensors file safe to load from an untrusted model hub where a pickled checkpoint is "
            "not, and what else does its layout make possible?"
        ),
    ),
    Problem(
        id="4.2",
        function="index_domain_to_byte_runs",
        signature=("bounds", "global_shape", "itemsize", "base"),
        points=15,
        title="From a shard's index domain to byte runs",
        statement=(
            "A tensor of `global_shape` is stored row-major (C order) from byte `base` of a file, "
            "`itemsize` bytes per element. A shard is the index domain `bounds`: a (start, stop) pair per "
            "dimension, stop exclusive (empty for a scalar). Return the bytes the shard occupies as a list "
            "of (offset, length) tuples, sorted by offset, with runs that touch merged: trailing dimensions "
            "taken in full continue the run, so a shard of the leading dimension is one run and a shard of "
            "an inner dimension is one run per row. A scalar is `[(base, itemsize)]`. This is Orbax's own "
            "`index_domain_to_byte_runs`."
        ),
        returns=Struct(_RUNS),
        hints=(
            "Row-major byte strides: the last dimension's is itemsize, and each one before is the next "
            "stride times the next dimension's size.",
            "Walk from the last dimension backwards while the bounds cover the whole dimension, (0, n): "
            "those bytes are contiguous. The first dimension k that is not whole ends each run: "
            "length = (stop_k - start_k) * stride_k.",
            "One run starts at every index of the dimensions before k: "
            "`base + start_k * stride_k + sum(i_d * stride_d)` over `itertools.product` of their ranges. "
            "If every dimension is whole, the tensor is one run.",
        ),
        examples=(
            Example((((0, 4), (0, 4)), (4, 8), 4, 0), [(0, 16), (32, 16), (64, 16), (96, 16)],
                    "the left half of a (4, 8) float32 tensor: one run per row"),
            Example((((2, 4), (0, 8)), (4, 8), 4, 100), [(164, 64)], "two whole rows: one run"),
            Example(((), (), 2, 10), [(10, 2)], "a scalar"),
        ),
        difficulty="medium",
        category="layout",
        tags=("safetensors", "reads"),
        why=(
            "In a row-major tensor the trailing dimensions taken whole are contiguous: the first dimension that "
            "is not whole, walking back from the last, sets each run's length, and a run starts at every index of"
            " the dimensions before it."
        ),
        next_question=(
            "A column shard of a 4096 x 4096 float32 tensor is 4096 small runs: how long would reading them take "
            "on object storage at 20 ms a request, and what would you change?"
        ),
    ),
    Problem(
        id="4.3",
        function="coalesce_runs",
        signature=("runs", "max_gap"),
        points=10,
        title="Coalesce byte runs into fewer reads",
        statement=(
            "Each read has a fixed cost, so nearby runs are better read together, gap included. Given "
            "`runs`, a list of (offset, length) tuples in any order, return the reads as a list of "
            "(offset, length) tuples sorted by offset: covering every run, merging a run into the current "
            "read when it overlaps it or the gap between them is at most `max_gap` bytes. This is the gap rule "
            "of Orbax's `_partition_runs` (`min_coalesce_gap=max_gap`); its over-read ratio, which cannot be "
            "switched off and counts overlapping bytes twice, may merge more."
        ),
        returns=Struct(_RUNS),
        hints=(
            "Sort by offset first, then sweep once, keeping the current read as (start, end).",
            "The gap to the next run is `offset - end`: zero when they touch, negative when they overlap. "
            "Merge when `gap <= max_gap`.",
            "A merged read ends at `max(end, offset + length)`: a run inside the current read must not "
            "shorten it. Return (start, end - start).",
        ),
        examples=(
            Example(([(0, 16), (32, 16), (64, 16)], 16), [(0, 80)], "gaps of exactly 16 bytes merge"),
            Example(([(0, 16), (32, 16), (64, 16)], 15), [(0, 16), (32, 16), (64, 16)]),
            Example(([(100, 10), (0, 10), (5, 10)], 0), [(0, 15), (100, 10)], "unsorted and overlapping"),
            Example(([(0, 100), (10, 10), (200, 10)], 0), [(0, 100), (200, 10)],
                    "a run inside another: the read still covers the larger one"),
        ),
        difficulty="easy",
        category="layout",
        tags=("reads",),
        why=(
            "Every read has a fixed cost (a system call, a round trip to object storage), so merging runs across "
            "small gaps trades bytes read in vain for fewer reads; a sorted sweep that keeps the furthest end "
            "merges touching, overlapping and nested runs alike."
        ),
        next_question=(
            "How would you choose the gap allowance for local NVMe and for GCS, and what measurement would tell "
            "you it is right?"
        ),
    ),
    Problem(
        id="4.4",
        function="read_shard",
        signature=("path", "name", "bounds"),
        points=20,
        title="Read one shard, and only its bytes",
        statement=(
            "Return the shard `bounds` of tensor `name` in the safetensors file `path` as a NumPy array with "
            "the tensor's dtype (F64, F32, F16, I64, I32, I16, I8, U8 or BOOL) and shape (stop - start per "
            "dimension). Read only the bytes the shard needs: the header, then each byte run with "
            "`f.seek(offset)` and `f.read(length)` (use problems 4.1 and 4.2). The grader counts every byte "
            "your process reads while the function runs (the kernel's count) and allows the 8 + N header "
            f"bytes, the shard's bytes and {READ_SLACK // 1024} KiB more: reading the whole tensor fails. "
            "Memory maps (np.memmap, safetensors.safe_open) are switched off while grading, and so are new "
            "threads and processes (your function runs in one thread); a buffered file fetches a whole buffer "
            "(the file's st_blksize, often 4 KiB) per small read, so open the file with `open(path, 'rb', buffering=0)`."
        ),
        returns=SafetensorsShard(),
        hints=(
            "`header, data_start = parse_safetensors_header(path)`; the tensor starts at "
            "`data_start + header[name]['data_offsets'][0]`.",
            "Map the dtype string to NumPy, e.g. {'F32': np.float32, 'F16': np.float16, 'I8': np.int8, "
            "'U8': np.uint8, 'BOOL': np.bool_, ...}, then "
            "`runs = index_domain_to_byte_runs(bounds, shape, dtype.itemsize, base)`.",
            "With `open(path, 'rb', buffering=0)`, `f.seek(offset); f.read(length)` for each run, join the "
            "pieces with `b''.join(...)`, then `np.frombuffer(data, dtype).reshape(shape)`.",
        ),
        examples=(
            Example((SafetensorsArg((("extra", (3, 5), "int8"), ("w", (256, 256), "float32")), 0), "w",
                     ((0, 256), (64, 96))), None,
                    "columns 64:96 of a (256, 256) float32 tensor: 256 strided runs of 128 bytes"),
            Example((SafetensorsArg((("step", (), "int64"), ("mask", (6, 4), "bool")), 1), "step", ()), None,
                    "a scalar"),
            Example((SafetensorsArg((("extra", (3, 5), "int8"), ("w", (256, 256), "float32")), 0), "extra",
                     ((1, 3), (0, 5))), None,
                    "rows 1:3 of an int8 tensor stored after a 256 KiB one: it starts at data_start + "
                    "data_offsets[0], not where the data section starts"),
            Example((SafetensorsArg((("step", (), "int64"), ("mask", (6, 4), "bool")), 1), "mask",
                     ((2, 5), (0, 4))), None,
                    "rows 2:5 of a BOOL tensor: one byte per element, returned as NumPy's bool"),
        ),
        count_reads=True,
        difficulty="hard",
        category="formats",
        tags=("safetensors", "reads", "io"),
        why=(
            "Seeking to each run and reading exactly its bytes from an unbuffered file makes the kernel count "
            "little beyond the header and the shard; a buffered file fetches a whole buffer per small read, so "
            "strided runs silently read what lies between them."
        ),
        next_question=(
            "How would you read the same shard from GCS or S3 instead of a local file, and how many requests "
            "would a column shard take?"
        ),
    ),
    Problem(
        id="4.5",
        function="best_presharding",
        signature=("global_shape", "itemsize", "mesh_shape", "spec", "candidates", "devices_per_host"),
        points=20,
        title="Which pre-sharded chunk shape loads fastest",
        statement=(
            "A weight of `global_shape` (`itemsize` bytes per element) will be loaded onto the mesh "
            "`mesh_shape` with `spec`, by hosts of `devices_per_host` devices each (device d on host "
            "d // devices_per_host). `candidates` maps a name to the chunk shape of a checkpoint pre-sharded "
            "that way (each divides the global shape). As in problem 3.2, a host reads each chunk its "
            "devices overlap once, whole. Return `(best, reads)`: `reads` maps each candidate's name to the "
            "bytes all hosts read together (an int), and `best` is the name with the fewest; on a tie, the "
            "name that sorts first." + CONVENTIONS
        ),
        returns=Struct(("fixed", ("str", ("dict", "str", "int")))),
        hints=(
            "This is problems 3.1 and 3.2 counted in bytes: for each device's index domain, the chunks it "
            "overlaps along a dimension are `start // c` to `ceil(stop / c) - 1`.",
            "Collect each host's chunks in a set (`device // devices_per_host`); the bytes read are the sizes "
            "of those sets, summed over hosts, times `math.prod(chunk) * itemsize`.",
            "`best = min(sorted(reads), key=reads.get)` picks the fewest bytes and breaks ties by name.",
        ),
        examples=(
            Example(((16, 2, 64, 16), 2, {"x": 16}, (None, None, "x"), _MOE, 4),
                    ("fsdp16", {"ep16": 262144, "fsdp16": 65536}),
                    "4 hosts: on an FSDP target each host reads every expert-sharded chunk, 4x what a "
                    "pre-sharded checkpoint costs it"),
            Example(((16, 8), 4, {"x": 2, "y": 4}, (("x", "y"),), {"rows8": (8, 8), "cols4": (8, 4), "rows4": (4, 8)}, 4),
                    ("cols4", {"rows8": 512, "cols4": 512, "rows4": 512}),
                    "('x', 'y') splits the rows in 8, x the most significant, so each host of 4 devices holds 8 whole "
                    "rows: every candidate reads them once, and the tie goes to the name that sorts first"),
        ),
        difficulty="hard",
        category="layout",
        tags=("presharding", "reads"),
        why=(
            "A host reads every chunk its devices overlap, once and whole, so the bytes read depend on how the "
            "chunk grid lines up with the load layout's slices: matching chunks read each byte once per host that"
            " needs it, misaligned ones read whole chunks on every host."
        ),
        next_question=(
            "A checkpoint pre-sharded for one mesh loads slowly on every other: how would you decide which layout"
            " to store, or whether to keep two copies?"
        ),
    ),
)
