"""What Unit 9's conversions must write, one spec each: problem 9.1's Hugging Face folder, read back
by the grader's own sandboxed worker (:data:`autograder.wall.reader.HF_SOURCE`), and problem 9.2's
Orbax checkpoint, restored by its Orbax reader. As in :mod:`autograder.wall.problem_returns`, each
also checks a public example from the example's own arguments, in the learner's kernel."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.wall.problem_returns import UnstackedTree, written_leaves_error
from autograder.wall.returns import ReturnSpec


@dataclass(frozen=True)
class HFWritten(ReturnSpec):
    """Problem 9.1's folder, read back by the grader's own sandboxed worker
    (:data:`autograder.wall.reader.HF_SOURCE`): every tensor (digests: names, dtypes, shapes and bytes
    must all match), the files' names, sizes and ``format`` metadata, the index's ``total_size`` and
    ``config.json``. The expected value carries the case's shard limit (``"limit"``)."""

    checks_examples = True

    @property
    def describe(self) -> str:
        return "a Hugging Face checkpoint in out_dir: sharded safetensors files, their index and config.json"

    def type_error(self, v, detail: bool = True) -> str | None:
        from autograder.wall.reader import UNREADABLE_HF

        if isinstance(v, str) and v.startswith(UNREADABLE_HF):
            return f"wrote {v[0].lower()}{v[1:]}"
        if type(v) is not dict or set(v) != {"tensors", "files", "total_size", "config"}:
            return f"must write {self.describe}"
        return None

    def has_nan(self, v) -> bool:
        return False

    @staticmethod
    def layout_error(files: dict, limit: int) -> str | None:
        """What is wrong with the files' names, sizes and metadata, or None."""
        names = sorted(files)
        count = len(names)
        if any(f["bytes"] > limit and f["tensors"] > 1 for f in files.values()):
            return "shard_size"
        if names != [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]:
            return "file_names"
        if any(f["format"] != "pt" for f in files.values()):
            return "format"
        return None

    def equal(self, actual, expected) -> bool:
        a, e = actual["tensors"], expected["tensors"]
        if set(a) != set(e) or not all(a[k].same(e[k]) for k in e):
            return False
        if actual["config"] != expected["config"] or actual["total_size"] != expected["total_size"]:
            return False
        return self.layout_error(actual["files"], expected["limit"]) is None

    def check_example(self, args, real_args, got) -> str | None:
        """Read what the function wrote (in the learner's kernel) with ckptlab.hf's reader and compare it
        with the checkpoint's model in Hugging Face's layout."""
        from ckptlab.hf import HFFormatError, open_hf, to_hf

        ckpt = args[0]
        _, out_dir, config, limit, dtype = real_args
        try:
            folder = open_hf(out_dir)
        except HFFormatError as exc:
            return f"out_dir is not a well-formed Hugging Face checkpoint: {exc}"
        want = to_hf(ckpt.params(), ckpt.llama_config(), dtype)
        if set(folder.names()) != set(want):
            missing, extra = sorted(set(want) - set(folder.names())), sorted(set(folder.names()) - set(want))
            return f"the tensors are not the model's: missing {missing[:3]}, not expected {extra[:3]}"
        for name, value in want.items():
            got_value = np.asarray(folder[name])
            if got_value.dtype != value.dtype or got_value.shape != value.shape:
                return f"{name} is {got_value.dtype}{list(got_value.shape)}, expected {value.dtype}{list(value.shape)}"
            if not np.array_equal(got_value.view(np.uint8), value.view(np.uint8)):
                return f"{name} does not hold the converted values"
        files = {f: {"bytes": sum(e - b for _, _, b, e in t.values()), "tensors": len(t),
                     "format": folder.metadata(f).get("format")} for f, (_, t, _) in folder.files.items()}
        bad = self.layout_error(files, limit)
        if bad:
            return {"file_names": "the files must be model-00001-of-0000N.safetensors ... model-0000N-of-0000N.safetensors, "
                             "with model.safetensors.index.json",
                    "shard_size": f"a file holds more than {limit} bytes of tensors (and more than one tensor)",
                    "format": 'every file\'s header needs "__metadata__": {"format": "pt"}'}[bad]
        if folder.total_size != sum(v.nbytes for v in want.values()):
            return "the index's metadata.total_size is not the bytes of all the tensors"
        if folder.config != {**config, "torch_dtype": dtype}:
            return "config.json must hold config, with \"torch_dtype\" set to dtype"
        return None


@dataclass(frozen=True)
class ConvertedTree(UnstackedTree):
    """Problem 9.2's checkpoint, written to its output folder and restored by the grader's own worker
    with no target: the model's leaves (under ``params`` for a Linen tree), each in the file's dtype,
    placed as ``NamedSharding(mesh, specs[path])``."""

    @property
    def describe(self) -> str:
        return "an Orbax checkpoint in out_dir: the model's leaves, each placed on the mesh"

    def check_example(self, args, real_args, got) -> str | None:
        from orbax.checkpoint import v1 as ocp

        from ckptlab.hf import from_hf, open_hf
        from ckptlab.llama import flatten

        hf_dir, out_dir, mesh, specs, tree = real_args
        source = open_hf(hf_dir)
        want = from_hf(source, args[0].llama_config())
        try:
            written = flatten(dict(ocp.load(out_dir)))
        except Exception as exc:  # noqa: BLE001 - shown to the learner, in their own kernel
            return f"no checkpoint could be restored from out_dir ({type(exc).__name__}: {str(exc)[:200]})"
        prefix = "params/" if tree == "linen" else ""
        want = {prefix + path: (value, tuple(specs[path])) for path, value in want.items()}
        return written_leaves_error(written, want, mesh, "the model's", "the converted values")
