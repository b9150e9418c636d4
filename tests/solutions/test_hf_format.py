"""Hostile Hugging Face folders: ``ckptlab.hf``'s careful reader (``open_hf``) on folders crafted from a
well-formed one, and problem 9.1 graded on answers that write them. In 9.1 the learner's function writes
the folder and the grader reads it back in a sandboxed worker of its own
(``autograder.wall.reader.HF_SOURCE``), so every byte of it is hostile.

- The reader: each damage is an ``HFFormatError`` whose message names it (a word of it asserted), and
  no file of the test's own folder outside the checkpoint's is ever opened, nor a pipe anywhere (an
  audit hook refuses such an open as it starts: a reader that follows a link out fails the test at
  once, and one that opens a pipe fails it instead of hanging). Each test says which line it holds:
  without that line it fails. Beside them, a well-formed folder written by ``save_hf`` (float32,
  bfloat16, one file without an index) reads back equal, bit for bit.
- What the grader's reader says of a refused folder: fixed words chosen by the kind of damage
  (``reader.HF_REASONS``), never the error's own text, which quotes the folder's names: every hostile
  name here holds ``SECRET``, which the grader's words must never hold (a file name in the index could
  carry a hidden case's inputs into the learner's message).
- Through the grader (slow): a right 9.1 answer (the reference, with the problem notebook's imports)
  scores full marks; the same answer made to point its index at a file outside out_dir (in the folder
  above, by an absolute path, by a link, a link into the grader's own ckpt_dir) or to lie about its
  shards' sizes scores 0, the grade finishing and saying what is wrong, never blaming the grader; and
  one that writes a hidden case's inputs into a file name gets them shown nowhere.
"""

from __future__ import annotations

import inspect
import json
import os
import stat
import sys
import textwrap

import ml_dtypes  # noqa: F401 - imported before any read is watched (an import opens files too)
import numpy as np
import pytest

from autograder.wall import reader
from ckptlab import hf
from ckptlab.hf import INDEX, SINGLE, HFFormatError, open_hf, save_hf
from ckptlab.llama import LlamaConfig

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


# ---------------------------------------------------------------------------------------------
# Watching what the reader opens: a file of the test's folder outside the checkpoint's, or a pipe.

class ReadOutside(BaseException):
    """An open the reader must never make (a BaseException: no ``except Exception`` swallows it)."""


_WATCHED: list = []  # (the test's folder, the checkpoint's folder), both resolved, while a read runs


def _audit(event, args):
    if event != "open" or not _WATCHED or not isinstance(args[0], (str, bytes)):
        return
    root, folder = _WATCHED[-1]
    path = os.fsdecode(args[0])
    real = os.path.realpath(path)
    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        fifo = False
    if fifo:
        raise ReadOutside(f"opened the pipe {path} (an open that waits for a writer forever)")
    if real.startswith(root + os.sep) and os.path.dirname(real) != folder:
        raise ReadOutside(f"opened {path}, which is {real}: outside the checkpoint's folder {folder}")


sys.addaudithook(_audit)  # (for the session; it looks only while _WATCHED is set)


def _watched(folder, fn):
    root = os.path.dirname(os.path.realpath(folder))
    _WATCHED.append((root, os.path.realpath(folder)))
    try:
        return fn()
    finally:
        _WATCHED.pop()


def _read(folder):
    """open_hf and every tensor read, watched."""
    def run():
        checkpoint = open_hf(str(folder))
        return checkpoint, {name: np.array(checkpoint[name]) for name in checkpoint.names()}
    return _watched(folder, run)


_GRADERS_READER: dict = {}
exec(reader.HF_SOURCE, _GRADERS_READER)  # the grader's read-back code, run here unsandboxed (it is ours)


def _grader_says(folder):
    return _watched(folder, lambda: _GRADERS_READER[reader.HF_FUNCTION](str(folder)))


def _refused(folder, *words) -> HFFormatError:
    """The reader refuses the folder, its message holding ``words``; the grader's reader says so in
    its fixed words for that damage (not the catch-all), none of the folder's own."""
    with pytest.raises(HFFormatError) as info:
        _read(folder)
    for word in words:
        assert word in str(info.value), str(info.value)
    said = _grader_says(folder)
    assert isinstance(said, str) and said.startswith(reader.UNREADABLE_HF + ": "), said
    reason = said[len(reader.UNREADABLE_HF) + 2:]
    assert reason in [r for _, r in reader.HF_REASONS[:-1]], said  # a damage named, not "not well-formed"
    assert "SECRET" not in said, said
    return info.value


# ---------------------------------------------------------------------------------------------
# A well-formed folder, and the pieces hostile ones are made of.

def _file(path, header, data: bytes = b"", length: int | None = None) -> None:
    """A safetensors file with any header (a dict, or raw bytes) and data, its 8-byte length ``length``
    if given (else the header's own)."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write((len(text) if length is None else length).to_bytes(8, "little") + text + data)


def _entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _index(folder, weight_map, **extra) -> None:
    (folder / INDEX).write_text(json.dumps({"metadata": {"total_size": 44}, "weight_map": weight_map, **extra}))


_MAP = {"SECRET.a": SHARD1, "SECRET.b": SHARD1, "SECRET.c": SHARD2}


@pytest.fixture
def good(tmp_path):
    """Two shards and their index (SECRET.a float32 (2, 3) and SECRET.b float32 (2,) in the first,
    SECRET.c bfloat16 (6,) in the second) and config.json: read back whole (the control)."""
    folder = tmp_path / "hf"
    folder.mkdir()
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([7, 8], np.float32)
    c = np.arange(6).astype(ml_dtypes.bfloat16)
    hf._write_file(str(folder / SHARD1), {"SECRET.a": a, "SECRET.b": b})
    hf._write_file(str(folder / SHARD2), {"SECRET.c": c})
    _index(folder, _MAP)
    (folder / "config.json").write_text(json.dumps(LlamaConfig().hf_config()))
    checkpoint, tensors = _read(folder)
    assert set(tensors) == set(_MAP) and np.array_equal(tensors["SECRET.a"], a) and tensors["SECRET.c"].dtype == c.dtype
    assert isinstance(_grader_says(folder), dict)
    return folder


def _outside(tmp_path, name="SECRET.safetensors"):
    """A well-formed shard outside the checkpoint's folder, holding what the index says: a reader
    that followed a path to it would read it happily."""
    path = tmp_path / name
    hf._write_file(str(path), {"SECRET.c": np.arange(6).astype(ml_dtypes.bfloat16)})
    return path


# ---------------------------------------------------------------------------------------------
# A file the index names outside the folder, or a link.

@pytest.mark.parametrize("how", ["../", "absolute", "sub/"])
def test_an_index_naming_a_file_outside_the_folder_is_refused_unread(good, tmp_path, how):
    """Holds ``_inside``'s first check (a name with a "/" in it, ".." and kin refused): the file it
    names is there, well-formed, and would be read."""
    target = {"../": "../SECRET.safetensors", "absolute": str(tmp_path / "SECRET.safetensors"),
              "sub/": "sub/SECRET.safetensors"}[how]
    _outside(tmp_path)
    (good / "sub").mkdir()
    _outside(good / "sub")
    os.remove(good / SHARD2)
    _index(good, {**_MAP, "SECRET.c": target})
    _refused(good, "own folder")


@pytest.mark.parametrize("name", ["../x.safetensors", "/etc/passwd", "sub/x", "", ".", "..", "a\0b", None, 3, ["x"]])
def test_inside_accepts_only_a_plain_name_of_the_folder(tmp_path, name):
    """Holds ``_inside``'s first check, on each kind of name (a JSON value of any type)."""
    with pytest.raises(HFFormatError, match="own folder"):
        hf._inside(str(tmp_path), name)


def test_a_name_the_file_system_cannot_spell_is_refused_as_missing(good):
    """Holds ``_inside``'s ``except (OSError, ValueError)``: a lone surrogate in a JSON string made
    ``os.lstat`` raise UnicodeEncodeError, out of the reader (fixed here)."""
    _index(good, {**_MAP, "SECRET.c": "\ud800SECRET.safetensors"})
    _refused(good, "not in the folder")


def test_a_missing_shard_is_refused(good):
    """Holds ``_inside``'s lstat (a missing file said as one, not a FileNotFoundError)."""
    os.remove(good / SHARD2)
    _refused(good, "not in the folder")


@pytest.mark.parametrize("what", ["shard", "single", "pipe", "folder"])
def test_a_shard_that_is_a_link_a_pipe_or_a_folder_is_refused_unread(good, tmp_path, what):
    """Holds ``_inside``'s ``S_ISREG(os.lstat(...))``: a link to a well-formed shard outside would be
    followed (the watch refuses that open), a pipe would hang the reader's open."""
    os.remove(good / SHARD2)
    if what == "shard":
        os.symlink(_outside(tmp_path), good / SHARD2)
    elif what == "single":  # no index: model.safetensors alone, a link
        for name in (SHARD1, INDEX):
            os.remove(good / name)
        os.symlink(_outside(tmp_path), good / SINGLE)
    elif what == "pipe":
        os.mkfifo(good / SHARD2)
    else:
        (good / SHARD2).mkdir()
    _refused(good, "not a plain file")


def test_a_link_to_a_file_of_the_same_folder_is_refused_too(good):
    """Holds the same line: a link is never followed, wherever it points."""
    os.replace(good / SHARD2, good / "SECRET.real")
    os.symlink("SECRET.real", good / SHARD2)
    _refused(good, "not a plain file")


@pytest.mark.parametrize("what", ["link", "pipe"])
def test_an_index_that_is_a_link_or_a_pipe_is_refused_unread(good, tmp_path, what):
    """Holds ``_read_index``'s ``S_ISREG(os.lstat(...))``: an index outside, well-formed, would be read."""
    outside = tmp_path / "SECRET.json"
    outside.write_text((good / INDEX).read_text())
    os.remove(good / INDEX)
    if what == "link":
        os.symlink(outside, good / INDEX)
    else:
        os.mkfifo(good / INDEX)
    _refused(good, "not a plain file")


@pytest.mark.parametrize("what", ["link", "pipe"])
def test_a_config_that_is_a_link_or_a_pipe_is_refused_unread(good, tmp_path, what):
    """Holds ``_read_config``'s ``S_ISREG(os.lstat(...))``."""
    outside = tmp_path / "SECRET.json"
    outside.write_text((good / "config.json").read_text())
    os.remove(good / "config.json")
    if what == "link":
        os.symlink(outside, good / "config.json")
    else:
        os.mkfifo(good / "config.json")
    _refused(good, "config.json is not a plain file")


# ---------------------------------------------------------------------------------------------
# Headers that do not fit their file.

def test_a_header_length_past_the_end_of_the_file_is_refused(good):
    """Holds ``read_header``'s ``n > min(MAX_HEADER, size - 8)``: a length one byte past the file's end
    (without it: a short read, said as a header that is not JSON)."""
    size = os.path.getsize(good / SHARD2)
    text = (good / SHARD2).read_bytes()
    (good / SHARD2).write_bytes((size - 8 + 1).to_bytes(8, "little") + text[8:])
    _refused(good, "claims", "bytes")


def test_a_huge_header_length_is_refused_without_reading(good):
    """The same line, with an 8-byte length of 2**62 (without it, a read to the end of the file)."""
    text = (good / SHARD2).read_bytes()
    (good / SHARD2).write_bytes((2**62).to_bytes(8, "little") + text[8:])
    _refused(good, "claims")


def test_a_file_shorter_than_its_8_byte_length_is_refused(good):
    """Holds ``len(head) < 8``."""
    (good / SHARD2).write_bytes(b"\x01\x02")
    _refused(good, "shorter")


@pytest.mark.parametrize(("data", "say"), [(b"\0" * 8, "accounts for 12 bytes of data, but the file holds 8"),
                                           (b"\0" * 16, "accounts for 12 bytes of data, but the file holds 16")],
                         ids=["past the end", "bytes left over"])
def test_data_offsets_past_the_end_of_the_file_or_bytes_left_over_are_refused(good, data, say):
    """Holds ``covered != data``: a tensor whose offsets run past the file's end (without it, NumPy's
    memory map fails, a ValueError), or a file holding more data than its header accounts for (a
    shard bigger than its header says, past a size limit unseen)."""
    _file(good / SHARD2, {"SECRET.c": _entry("F32", [3], 0, 12)}, data)
    _refused(good, say)


@pytest.mark.parametrize(("entries", "say"), [
    ({"SECRET.c": _entry("F32", [2], 0, 8), "SECRET.d": _entry("F32", [2], 4, 12)}, "follow one another"),  # overlap
    ({"SECRET.c": _entry("F32", [2], 0, 8), "SECRET.d": _entry("F32", [2], 12, 20)}, "follow one another"),  # gap
    ({"SECRET.c": _entry("F32", [2], 4, 12)}, "starts at byte 4"),  # a gap before the first
], ids=["overlap", "gap", "gap before the first"])
def test_tensors_overlapping_or_with_gaps_are_refused(good, entries, say):
    """Holds the ``begin != covered`` check (without it each of these is accepted: the data is
    exactly as long as the last tensor's end)."""
    end = max(e["data_offsets"][1] for e in entries.values())
    _file(good / SHARD2, entries, b"\0" * end)
    _index(good, {**_MAP, **{k: SHARD2 for k in entries}})
    _refused(good, say)


@pytest.mark.parametrize("entry", [_entry("F32", [3], 0, 8), _entry("F32", [2], 8, 0), _entry("F32", [2], -4, 4),
                                   _entry("BF16", [2], 0, 8)],
                         ids=["too few bytes", "backwards", "negative start", "too many bytes"])
def test_a_span_that_is_not_the_shape_times_the_dtype_is_refused(good, entry):
    """Holds ``not 0 <= begin <= end or end - begin != need``: 3 float32s in 8 bytes, offsets backwards,
    a negative start, 2 bfloat16s in 8 bytes (the data as long as the span: without the line, the
    first and last are accepted and read wrongly)."""
    span = abs(entry["data_offsets"][1] - entry["data_offsets"][0])
    _file(good / SHARD2, {"SECRET.c": entry}, b"\0" * span)
    _refused(good, "claims bytes")


@pytest.mark.parametrize(("entry", "data"), [
    ({"dtype": "F8", "shape": [2], "data_offsets": [0, 8]}, 8),  # a dtype unknown
    (_entry("F32", [-2], 0, 8), 8), (_entry("F32", [True, 2], 0, 8), 8), (_entry("F32", "ab", 0, 8), 8),
    (_entry("F32", [2], 0.0, 8), 8), ({"dtype": "F32", "shape": [2]}, 8), ("SECRET", 8), ([1, 2], 8),
    (_entry("F32", [1] * 70, 0, 4), 4),  # more dimensions than NumPy holds: a ValueError at the read (fixed here)
    (_entry("F32", [2**62, 2**62, 0], 0, 0), 0),  # no bytes, but a shape too big for NumPy (fixed here)
], ids=["unknown dtype", "negative dim", "bool dim", "string shape", "float offset", "no offsets", "a string",
        "a list", "70 dims", "too big for NumPy"])
def test_a_tensor_entry_that_cannot_be_read_is_refused(good, entry, data):
    """Holds the entry's checks (dtype known, shape of non-negative ints NumPy can hold, int offsets).
    The last two hold ``np.broadcast_to(...)``, added here: without it the reader accepted them and
    failed reading the tensor (ValueError)."""
    _file(good / SHARD2, {"SECRET.c": entry}, b"\0" * data)
    _refused(good, "no readable dtype, shape and data_offsets")


_C = '{"dtype": "BF16", "shape": [6], "data_offsets": [0, 12]}'


@pytest.mark.parametrize(("header", "say"), [
    ('{"__metadata__": {"format": "pt", "total_size": 12}, "SECRET.c": ' + _C + "}", "not a string"),
    ('{"__metadata__": ["pt"], "SECRET.c": ' + _C + "}", "not an object of strings"),
    ('{"__metadata__": {"format": "pt"}, "__metadata__": {"format": "pt"}, "SECRET.c": ' + _C + "}", "twice"),
    ('{"__metadata__": {"format": "pt", "n": NaN}, "SECRET.c": ' + _C + "}", "NaN"),
    ('{"SECRET.c": ' + _C + ', "\\ud800": {"x": 1}}', "lone surrogate"),
    ('{"SECRET.c": {"dtype": "BF16", "dtype": "BF16", "shape": [6], "data_offsets": [0, 12]}}', "dtype twice"),
], ids=["metadata holds a number", "metadata a list", "metadata twice", "NaN", "lone surrogate", "a field twice"])
def test_a_header_safe_open_refuses_is_refused(good, header, say):
    """Headers Python's json reads and safetensors' safe_open (so transformers) refuses: refused here, said
    in the grader's fixed words (a hostile holdout's 9.1 wrote the first and scored 20/20). That the library
    refuses each, and the reader nothing it opens: tests/solutions/test_hf_strict.py."""
    _file(good / SHARD2, header.encode(), b"\0" * 12)
    _refused(good, say, "safe_open refuses")


@pytest.mark.parametrize(("header", "say"), [(b"[" * 100_000 + b"]" * 100_000, "not JSON"),
                                            (b"{\"SECRET\": ", "not JSON"), (b"\xff\xfe", "not JSON"),
                                            (b"[1, 2]", "not a JSON object")],
                         ids=["nested 100000 deep", "cut short", "not UTF-8", "a list"])
def test_a_header_that_is_not_a_json_object_is_refused(good, header, say):
    """Holds the header's ``json.loads`` guard: the first, nested 100,000 deep, raised RecursionError
    out of the reader (``RecursionError`` added to the guard here)."""
    _file(good / SHARD2, header)
    _refused(good, say)


# ---------------------------------------------------------------------------------------------
# The index against the files.

def test_a_tensor_the_index_does_not_name_is_refused(good):
    """Holds the ``extra`` check: a file holds SECRET.c and SECRET.d, the index names only SECRET.c."""
    hf._write_file(str(good / SHARD2), {"SECRET.c": np.zeros(6, ml_dtypes.bfloat16), "SECRET.d": np.zeros(1, np.float32)})
    _refused(good, "does not name")


def test_a_tensor_named_by_the_index_but_not_in_its_file_is_refused(good):
    """Holds the ``tensor not in self.files[file][1]`` check."""
    _index(good, {**_MAP, "SECRET.d": SHARD2})
    _refused(good, "does not hold it")


def test_a_tensor_put_in_another_file_than_the_index_says_is_refused(good):
    """The same check: SECRET.c said to be in the first file, which does not hold it."""
    _index(good, {**_MAP, "SECRET.c": SHARD1})
    os.remove(good / SHARD2)
    _refused(good, "does not hold it")


def test_the_same_tensor_in_two_files_is_refused(good):
    """Holds the ``tensor in self.where`` check (the index can name it once only: a dict)."""
    hf._write_file(str(good / SHARD2), {"SECRET.c": np.zeros(6, ml_dtypes.bfloat16), "SECRET.a": np.zeros((2, 3), np.float32)})
    _refused(good, "in both")


@pytest.mark.parametrize(("index", "say"), [
    (b"{\"weight_map\": ", "not JSON"), (b"[" * 100_000, "not JSON"),  # (the second: RecursionError, fixed here)
    (b"\xff\xfe", "not JSON"),
    (json.dumps({"weight_map": [["SECRET.c", SHARD2]]}).encode(), "no weight_map"),
    (json.dumps({"weight_map": {"SECRET.c": 3}}).encode(), "no weight_map"),
    (json.dumps(["SECRET"]).encode(), "no weight_map"), (json.dumps({"metadata": {}}).encode(), "no weight_map"),
], ids=["cut short", "nested 100000 deep", "not UTF-8", "weight_map a list", "a file name not a string", "a list",
        "no weight_map"])
def test_an_index_that_is_not_a_weight_map_is_refused(good, index, say):
    """Holds ``_read_index``'s JSON guard and its ``weight_map`` check."""
    (good / INDEX).write_bytes(index)
    _refused(good, say)


def test_an_index_over_its_size_limit_is_refused_unparsed(good):
    """Holds ``os.path.getsize(path) > MAX_INDEX``: an index of 16 MiB and a byte (sparse: it costs no
    disk), refused by its size; without the line, parsed (16 MiB of zeros: not JSON)."""
    with open(good / INDEX, "r+b") as f:
        f.truncate(hf.MAX_INDEX + 1)
    _refused(good, "at most")


@pytest.mark.parametrize(("config", "say"), [(b"[" * 100_000, "config.json is not JSON"), (b"\xff", "config.json is not JSON"),
                                             (b"[1]", "config.json is not a JSON object")],
                         ids=["nested 100000 deep", "not UTF-8", "a list"])
def test_a_config_that_is_not_a_json_object_is_refused(good, config, say):
    """Holds ``_read_config``'s JSON guard (the first nested 100,000 deep: RecursionError, fixed here)
    and its object check."""
    (good / "config.json").write_bytes(config)
    _refused(good, say)


def test_a_folder_with_no_index_and_no_single_file_is_refused(good):
    os.remove(good / INDEX)
    _refused(good, "no model.safetensors.index.json and no model.safetensors")


def test_the_graders_reasons_are_all_words_of_the_readers_refusals():
    """Each fixed reason of the grader (reader.HF_REASONS) is chosen by words ckptlab/hf.py's refusals
    hold: a message reworded there leaves a reason dead here (and its hostile test above, which wants a
    reason named, falls to the catch-all)."""
    from ckptlab import stheader

    source = (inspect.getsource(hf) + inspect.getsource(stheader)).replace("{INDEX}", INDEX).replace(
        "{SINGLE}", SINGLE).replace("{METADATA}", stheader.METADATA)
    dead = [words for words, _ in reader.HF_REASONS[:-1] if words not in source]
    assert not dead and reader.HF_REASONS[-1][0] == "", dead


# ---------------------------------------------------------------------------------------------
# Well-formed folders, written by save_hf, read back equal.

def _model(dtype):
    config = LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, intermediate_size=48, tie_word_embeddings=False)
    rng = np.random.default_rng(7)
    tensors = {name: rng.standard_normal(shape).astype(np.float32).astype(hf._np_dtype(dtype))
               for name, shape in hf.hf_shapes(config).items()}
    return config, tensors


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_sharded_folder_written_by_save_hf_reads_back_equal(tmp_path, dtype):
    config, tensors = _model(dtype)
    folder = tmp_path / "hf"
    files = save_hf(str(folder), tensors, config, dtype, max_shard_bytes=4096)
    assert len(files) > 2 and all(hf.SHARD_NAME.match(f) for f in files) and (folder / INDEX).is_file()
    checkpoint, back = _read(folder)
    assert set(back) == set(tensors) and sorted(checkpoint.files) == files
    for name, value in tensors.items():
        assert back[name].dtype == value.dtype and back[name].shape == value.shape, name
        assert np.array_equal(back[name].view(np.uint8), value.view(np.uint8)), name
    assert checkpoint.total_size == sum(v.nbytes for v in tensors.values()) == checkpoint.data_bytes()
    assert checkpoint.config == config.hf_config(dtype)
    assert all(checkpoint.metadata(f) == {"format": "pt"} for f in files)
    said = _grader_says(folder)  # and the grader's reader gives the same folder back
    assert set(said) == {"tensors", "files", "total_size", "config"} and said["config"] == config.hf_config(dtype)
    assert all(np.array_equal(said["tensors"][k].view(np.uint8), v.view(np.uint8)) for k, v in tensors.items())
    assert all(f["format"] == "pt" for f in said["files"].values())
    assert max(f["bytes"] for f in said["files"].values() if f["tensors"] > 1) <= 4096


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_single_file_without_an_index_reads_back_equal(tmp_path, dtype):
    config, tensors = _model(dtype)
    folder = tmp_path / "hf"
    assert save_hf(str(folder), tensors, config, dtype, max_shard_bytes=2**30) == [SINGLE]
    assert not (folder / INDEX).exists()
    checkpoint, back = _read(folder)
    assert checkpoint.total_size is None and list(checkpoint.files) == [SINGLE]
    assert all(np.array_equal(back[k].view(np.uint8), v.view(np.uint8)) and back[k].dtype == v.dtype
               for k, v in tensors.items())
    assert set(back) == set(tensors)


def test_a_scalar_and_an_empty_tensor_read_back(tmp_path):
    """Shapes () and (0, 3) are a safetensors file's too: the NumPy check added here keeps them."""
    folder = tmp_path / "hf"
    folder.mkdir()
    hf._write_file(str(folder / SINGLE), {"s": np.float32(2.5).reshape(()), "e": np.zeros((0, 3), np.float32)})
    _, back = _read(folder)
    assert back["s"].shape == () and back["s"] == 2.5 and back["e"].shape == (0, 3)


# ---------------------------------------------------------------------------------------------
# Through the grader: problem 9.1, each hostile answer beside the control that scores full marks.

def _reference() -> str:
    """A right 9.1 answer: the problem notebook's imports and the reference's functions."""
    from autograder.units.unit9 import UNIT
    from solutions import unit9

    functions = [f for _, f in inspect.getmembers(unit9, inspect.isfunction) if f.__module__ == unit9.__name__]
    return (UNIT.imports.replace("from autograder.notebook import problem\n", "")
            + "\nfrom ckptlab.llama import flatten, nest\n\n\n"
            + "\n\n".join(inspect.getsource(f) for f in functions))


def _public_limits() -> list:
    from autograder.units.unit9 import PROBLEMS

    return sorted({e.args[3] for e in next(p for p in PROBLEMS if p.id == "9.1").examples})


# The reference writes the folder, then this changes it (``first``: its first shard's path, ``name`` its
# name, ``index``: the index, written back by ``save_index()``). Hidden cases only where ``hidden_only``.
_WRAPPER = '''

def orbax_to_hf(ckpt_dir, out_dir, config, max_shard_bytes, dtype):
    _right(ckpt_dir, out_dir, config, max_shard_bytes, dtype)
    if {hidden_only} and max_shard_bytes in {public}:
        return
    index_path = os.path.join(out_dir, "model.safetensors.index.json")
    with open(index_path) as f:
        index = json.load(f)
    name = sorted(set(index["weight_map"].values()))[0]
    first = os.path.join(out_dir, name)
    above = os.path.dirname(os.path.abspath(out_dir))

    def save_index():
        with open(index_path, "w") as f:
            json.dump(index, f)

{attack}
'''

_ATTACKS = {
    # the first shard moved to the folder above, the index naming it there
    "index names ../": ("""
    os.replace(first, os.path.join(above, name))
    index["weight_map"] = {k: "../" + v if v == name else v for k, v in index["weight_map"].items()}
    save_index()""", "the index names a file outside the folder"),
    "index names an absolute path": ("""
    os.replace(first, os.path.join(above, name))
    index["weight_map"] = {k: os.path.join(above, v) if v == name else v for k, v in index["weight_map"].items()}
    save_index()""", "the index names a file outside the folder"),
    # the first shard moved above, a link to it in its place
    "a shard linked to a copy above": ("""
    os.replace(first, os.path.join(above, name))
    os.symlink(os.path.join(above, name), first)""", "a shard is a link or a folder"),
    # a link into the grader's own checkpoint (ckpt_dir) in place of the first shard
    "a shard linked into ckpt_dir": ("""
    target = next(os.path.join(r, f) for r, _, fs in os.walk(ckpt_dir) for f in sorted(fs))
    os.remove(first)
    os.symlink(os.path.abspath(target), first)""", "a shard is a link or a folder"),
    # sizes that lie: the shard cut short of what its header accounts for
    "a shard shorter than its header says": ("""
    os.truncate(first, os.path.getsize(first) - 4)""", "a file does not hold exactly the bytes of data its header"),
    # ... padded past it (a shard bigger than max_shard_bytes, its header saying less)
    "a shard longer than its header says": ("""
    with open(first, "ab") as f:
        f.write(bytes(max_shard_bytes))""", "a file does not hold exactly the bytes of data its header"),
    # ... its 8-byte header length claiming far more than the file
    "a header length past the file's end": ("""
    with open(first, "r+b") as f:
        f.write((2**40).to_bytes(8, "little"))""", "a file's header length claims more bytes than the file holds"),
}


def _grade_91(grade_code, source):
    report = grade_code(source, problems=["9.1"], learner="ada")
    (result,) = report.problems
    return result


@pytest.mark.slow
def test_the_reference_control_scores_full_marks(grade_code):
    result = _grade_91(grade_code, _reference())
    assert (result.status, result.score) == ("correct", result.max_score), result.message


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(_ATTACKS))
def test_a_folder_reaching_outside_or_lying_about_its_sizes_scores_nothing(grade_code, attack):
    """Each attack on every case (public examples included): 0, said in the grader's fixed words (the
    reader's refusal), the grade finished, the grader not blamed. The control, the same code without
    the attack, scores full marks above."""
    code, says = _ATTACKS[attack]
    source = _reference().replace("def orbax_to_hf(", "def _right(") + _WRAPPER.format(
        hidden_only=False, public=_public_limits(), attack=textwrap.indent(textwrap.dedent(code).strip("\n"), "    "))
    result = _grade_91(grade_code, source)
    assert result.status == "incorrect" and result.score == 0, result.message
    assert says in result.message and reader.UNREADABLE_HF in result.message, result.message
    assert result.category != "grader" and "grader's failure" not in result.message, result.message


@pytest.mark.slow
def test_a_hidden_cases_inputs_written_into_a_file_name_are_shown_nowhere(grade_code):
    """Holds the grader's reader's fixed words (``HF_REASONS`` in ``reader.HF_SOURCE``, added here):
    the answer is right on the public examples, and on the hidden cases names a shard
    ``../LEAK<its config, limit and dtype>``. Before, the refusal's own text came back, 300 characters
    of it, and the learner's message quoted a hidden case's config."""
    code = """
    os.remove(first)
    index["weight_map"] = {k: "../LEAK" + json.dumps([config, max_shard_bytes, dtype]) if v == name else v
                           for k, v in index["weight_map"].items()}
    save_index()"""
    source = _reference().replace("def orbax_to_hf(", "def _right(") + _WRAPPER.format(
        hidden_only=True, public=_public_limits(), attack=textwrap.indent(textwrap.dedent(code).strip("\n"), "    "))
    result = _grade_91(grade_code, source)
    assert result.status == "incorrect" and result.score == 0, result.message
    assert "the index names a file outside the folder" in result.message, result.message
    for secret in ("LEAK", "rope_theta", "vocab_size", "float", "../"):
        assert secret not in result.message, result.message
    assert result.category != "grader", result.message


def test_the_graders_reader_refuses_unread_a_folder_of_sparse_files_claiming_gigabytes(tmp_path):
    """Holds reader.HF_SOURCE's cap (HF_MOST_BYTES): every tensor is read whole, so without it
    sparse files that claim GBs (a header and a hole) take the reader's worker to its memory limit."""
    folder = tmp_path / "sparse"
    folder.mkdir()
    n = 2 * 2**20  # float32s: 8 MiB a tensor, 80 of them claimed, nothing written but the headers
    names = []
    for i in range(10):
        header = {f"t{i}_{j}": _entry("F32", [n], j * 4 * n, (j + 1) * 4 * n) for j in range(8)}
        path = folder / f"model-{i + 1:05d}-of-00010.safetensors"
        _file(path, header)
        os.truncate(path, os.path.getsize(path) + 8 * 4 * n)  # a hole: the header's bytes, claimed, never written
        names += [(name, path.name) for name in header]
    _index(folder, dict(names))
    assert open_hf(str(folder)).data_bytes() > reader.HF_MOST_BYTES  # well-formed: only the cap refuses it
    said = _grader_says(folder)
    assert said == f"{reader.UNREADABLE_HF}: its files hold more than {reader.HF_MOST_BYTES >> 20} MiB of tensors, far more than the model"
