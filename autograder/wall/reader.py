"""The read-back worker's code: a checkpoint a learner's function wrote (problems 6.2 and 7.4) is read
back by this trusted code, run by the grader in a sandboxed worker of its own (the files are the
learner's: parsing them is never done in the grading process; :mod:`autograder.engine.readback` runs
it). It restores the checkpoint with no target, so the arrays come back in the layout they were
saved in, and returns them (as digests: see codec.ArrayDigest), or :data:`UNREADABLE` when there is
no checkpoint Orbax can restore at that path."""

from __future__ import annotations

UNREADABLE = "no Orbax checkpoint could be restored from the folder"

FUNCTION = "read_back"
SOURCE = f'''
import os


def {FUNCTION}(path):
    from orbax.checkpoint import v1 as ocp

    if not os.path.isdir(path) or os.path.islink(path):
        return {UNREADABLE!r}
    try:
        return dict(ocp.load(path))
    except Exception:  # noqa: BLE001 - any failure to restore is the learner's: said as one
        return {UNREADABLE!r}
'''


# Problem 9.1's folder: a Hugging Face checkpoint (sharded safetensors files, their index, its
# config), read by ckptlab.hf's careful reader (an index naming a file outside the folder, a header
# whose offsets do not fit its file: each refused, said). The value is the folder as the grader
# judges it: every tensor (as digests), each file's data bytes and tensor count, the index's
# total_size, each file's "format" metadata, and config.json; or UNREADABLE_HF and what is wrong.
UNREADABLE_HF = "no Hugging Face checkpoint could be read from the folder"
HF_FUNCTION = "read_back_hf"
HF_MOST_BYTES = 512 * 2**20  # 9.1's models hold at most 45 MiB; a folder claiming more is refused unread
# What is said of a folder ckptlab.hf refuses: fixed words, chosen by the fixed words of its
# HFFormatError, never that error's own text, which quotes the learner's names and numbers (a file
# name in the index could carry a hidden case's inputs into the message): the first pair whose
# fixed words the error's text holds (the last, whose are empty, when none does).
HF_REASONS = (
    ("a shard must be a file name in the checkpoint's own folder",
     "the index names a file outside the folder (a shard must be a file name in the checkpoint's own folder)"),
    ("which is not in the folder", "the index names a file that is not in the folder"),
    ("is not a plain file (a link or a folder)", "a shard is a link or a folder, not a plain file of the folder itself"),
    ("shorter than a safetensors header's 8-byte length", "a file is shorter than a safetensors header's 8-byte length"),
    ("its header claims", "a file's header length claims more bytes than the file holds"),
    # (a header safetensors' safe_open refuses, as ckptlab.stheader reads it)
    ("which is not JSON: safetensors' safe_open refuses it", "a file's header holds NaN or Infinity, which is not "
                                                             "JSON: safetensors' safe_open refuses it"),
    ("lone surrogate", "a file's header holds a lone surrogate escape (such as \\ud800), which is no character: "
                       "safetensors' safe_open refuses it"),
    ("__metadata__ twice", "a file's header holds __metadata__ twice: safetensors' safe_open refuses it"),
    ("not an object of strings", "a file's __metadata__ is not an object of strings: safetensors' safe_open "
                                 "refuses it"),
    ("refuses a file whose metadata values are not all strings",
     "a file's __metadata__ holds a value that is not a string: safetensors' safe_open (and so transformers) "
     "refuses a file whose metadata values are not all strings (write str(value))"),
    ("names its ", "a tensor's entry in a file's header names its dtype, shape or data_offsets twice: safetensors' "
                   "safe_open refuses it"),
    ("its header is not JSON", "a file's header is not JSON"),
    ("its header is not a JSON object", "a file's header is not a JSON object"),
    ("has no readable dtype, shape and data_offsets", "a tensor in a file's header has no readable dtype, shape and "
                                                      "data_offsets"),
    (" claims bytes ", "a tensor's data_offsets do not span its shape's bytes in its dtype"),
    ("the tensors must follow one another", "a file's tensors leave a gap or overlap: they must follow one another"),
    ("the header accounts for", "a file does not hold exactly the bytes of data its header accounts for (offsets "
                                "past its end, or bytes left over)"),
    (" is in both ", "a tensor is in two files"),
    ("whose header does not hold it", "the index puts a tensor in a file whose header does not hold it"),
    ("which the index does not name", "a file holds a tensor that the index does not name"),
    (".index.json is not a plain file", "model.safetensors.index.json is not a plain file of at most 16 MiB"),
    (".index.json is not JSON", "model.safetensors.index.json is not JSON"),
    ("has no weight_map of tensor names to file names", "model.safetensors.index.json has no weight_map of tensor "
                                                        "names to file names"),
    ("config.json is not a plain file", "config.json is not a plain file"),
    ("config.json is not JSON", "config.json is not JSON"),
    ("config.json is not a JSON object", "config.json is not a JSON object"),
    ("and no model.safetensors in the folder", "no model.safetensors.index.json and no model.safetensors in the folder"),
    ("", "the folder is not a well-formed Hugging Face checkpoint"),
)
HF_SOURCE = f'''
import os


def {HF_FUNCTION}(path):
    import numpy as np

    from ckptlab.hf import HFFormatError, open_hf

    if not os.path.isdir(path) or os.path.islink(path):
        return {UNREADABLE_HF!r} + ": out_dir is not a folder"
    try:
        checkpoint = open_hf(path)
        if checkpoint.data_bytes() > {HF_MOST_BYTES}:  # (every tensor is read whole below: sparse files could claim GBs)
            return {UNREADABLE_HF!r} + ": its files hold more than {HF_MOST_BYTES >> 20} MiB of tensors, far more than the model"
        files = {{}}
        for file, (_, tensors, _) in checkpoint.files.items():
            meta = checkpoint.metadata(file)
            files[file] = {{"bytes": sum(end - begin for _, _, begin, end in tensors.values()), "tensors": len(tensors),
                           "format": meta.get("format") if isinstance(meta.get("format"), str) else None}}
        return {{"tensors": {{name: np.array(checkpoint[name]) for name in checkpoint.names()}}, "files": files,
                "total_size": checkpoint.total_size, "config": checkpoint.config}}
    except HFFormatError as exc:
        return {UNREADABLE_HF!r} + ": " + next(said for words, said in {HF_REASONS!r} if words in str(exc))
    except Exception as exc:  # noqa: BLE001 - the files are the learner's: any failure to read them is said as one
        return {UNREADABLE_HF!r} + ": " + type(exc).__name__
'''
