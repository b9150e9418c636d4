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
HF_SOURCE = f'''
import os


def {HF_FUNCTION}(path):
    import numpy as np

    from ckptlab.hf import HFFormatError, open_hf

    if not os.path.isdir(path) or os.path.islink(path):
        return {UNREADABLE_HF!r} + ": out_dir is not a folder"
    try:
        checkpoint = open_hf(path)
        files = {{}}
        for file, (_, tensors, _) in checkpoint.files.items():
            meta = checkpoint.metadata(file)
            files[file] = {{"bytes": sum(end - begin for _, _, begin, end in tensors.values()), "tensors": len(tensors),
                           "format": meta.get("format") if isinstance(meta.get("format"), str) else None}}
        return {{"tensors": {{name: np.array(checkpoint[name]) for name in checkpoint.names()}}, "files": files,
                "total_size": checkpoint.total_size, "config": checkpoint.config}}
    except HFFormatError as exc:
        return {UNREADABLE_HF!r} + ": " + str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - the files are the learner's: any failure to read them is said as one
        return {UNREADABLE_HF!r} + ": " + type(exc).__name__
'''
