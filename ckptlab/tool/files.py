"""A file passed where the tool wants a checkpoint's folder: what it is, and what to pass instead
(a safetensors file, told from its header; a file inside a checkpoint, its folder named)."""

from __future__ import annotations

import json
from pathlib import Path


def safetensors_tensors(path: Path) -> int | None:
    """How many tensors the safetensors file ``path`` holds, from its header (8 bytes of length, then
    that much JSON); None when it is not one."""
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 2 <= n <= min(100 * 2**20, path.stat().st_size - 8):
                return None
            header = json.loads(f.read(n))
    except (OSError, ValueError, RecursionError):  # (a header nested past Python's limit is no safetensors header)
        return None
    return len([k for k in header if k != "__metadata__"]) if isinstance(header, dict) else None


def why_not_a_folder(path: Path) -> str:
    """Why the file ``path`` is refused where a checkpoint's folder is wanted, and what to pass instead."""
    tensors = safetensors_tensors(path)
    if tensors is not None or path.suffix == ".safetensors":
        held = "" if tensors is None else f" of {tensors} tensor(s)"
        return (f"{path} is a safetensors file{held}, not an Orbax checkpoint: this tool reads Orbax checkpoints. "
                "Its tensors' names, dtypes and shapes are in its header (ckptlab.serving.safetensors_header(path)); "
                "to inspect, plan or diff it, convert it into a sharded Orbax checkpoint first "
                "(ckptlab.serving.convert_safetensors(path, out_dir, rename, mesh, specs), as Lesson 6 does) and "
                "pass out_dir")
    if (path.parent / "_METADATA").exists():
        return f"{path} is a file: pass the checkpoint's folder, the one holding _METADATA ({path.parent})"
    return f"{path} is a file: pass the checkpoint's folder (the one holding _METADATA)"
