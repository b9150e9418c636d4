"""Hugging Face's layout for the course's Llama-shaped model (``ckptlab.llama``), and conversions both ways.

- Names and shapes: ``model.embed_tokens.weight``, ``model.layers.{i}.self_attn.{q,k,v,o}_proj.weight``,
  ``model.layers.{i}.mlp.{gate,up,down}_proj.weight``, ``model.layers.{i}.{input,post_attention}_layernorm.weight``,
  ``model.norm.weight`` and, unless the embeddings are tied, ``lm_head.weight``. Every weight is a
  PyTorch ``Linear``'s, ``(out, in)``; one tensor per layer; the norms' weights multiply as they are.
- The transforms between the two layouts, each a function named for what it does (:data:`TRANSFORMS`
  says which apply to which leaf).
- Sharded safetensors files with their index, written under a shard-size limit
  (:func:`write_shards`, as ``huggingface_hub`` splits a state dict), and read back by a careful
  reader (:func:`open_hf`): an index naming a file outside its folder, a header whose offsets do not
  fit its file, a file holding tensors the index does not name, each a clear :class:`HFFormatError`.
- The silent mistakes a conversion makes, planted on purpose (:func:`plant_mistake`).

The proof that a conversion is right is :mod:`ckptlab.hfcheck`'s; Lesson 9's conversions, leaf by
leaf, are :mod:`ckptlab.hfconvert`'s.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat

import numpy as np

from ckptlab import stheader
from ckptlab.llama import LlamaConfig, param_shapes

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
SHARD_NAME = re.compile(r"^model-(\d{5})-of-(\d{5})\.safetensors$")
# safetensors' dtype names, and NumPy's (bfloat16 is ml_dtypes')
DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64", "I32": "int32",
          "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool"}
CODES = {v: k for k, v in DTYPES.items()}
MAX_HEADER = 100 * 2**20  # safetensors' own limit on a header's length
MAX_INDEX = 16 * 2**20


class HFFormatError(ValueError):
    """A folder that is not a well-formed Hugging Face checkpoint, and what is wrong with it."""


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes  # noqa: F401 - registers bfloat16 with NumPy

    return np.dtype(name)


# ---------------------------------------------------------------------------------------------
# Names and shapes, and the transforms between the layouts.

def layer_name(i: int, part: str) -> str:
    return f"model.layers.{i}.{part}.weight"


LAYER_PARTS = ("input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def hf_shapes(config: LlamaConfig) -> dict:
    """Every Hugging Face tensor's name and shape: the embeddings, then layer by layer, then the final norm (and head)."""
    c, d, f = config, config.hidden_size, config.intermediate_size
    per_layer = {"input_layernorm": (d,), "self_attn.q_proj": (c.q_size, d), "self_attn.k_proj": (c.kv_size, d),
                 "self_attn.v_proj": (c.kv_size, d), "self_attn.o_proj": (d, c.q_size),
                 "post_attention_layernorm": (d,), "mlp.gate_proj": (f, d), "mlp.up_proj": (f, d),
                 "mlp.down_proj": (d, f)}
    shapes = {"model.embed_tokens.weight": (c.vocab_size, d)}
    for i in range(c.num_hidden_layers):
        shapes.update({layer_name(i, part): shape for part, shape in per_layer.items()})
    shapes["model.norm.weight"] = (d,)
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, d)
    return shapes


def transpose(kernel):
    """A Flax kernel ``(in, out)`` is a PyTorch ``Linear`` weight ``(out, in)`` transposed (and back)."""
    return np.ascontiguousarray(np.swapaxes(kernel, -1, -2))


def norm_to_hf(scale):
    """A norm scale stored around zero (``x * (1 + scale)``) as a weight that multiplies (``x * w``),
    in the scale's own dtype (NumPy would make ``bfloat16 + 1.0`` a float32)."""
    scale = np.asarray(scale)
    return (scale + 1.0).astype(scale.dtype)


def norm_from_hf(weight):
    weight = np.asarray(weight)
    return (weight - 1.0).astype(weight.dtype)


def split_qkv(kernel, config: LlamaConfig):
    """The fused projection's columns: every query head, then every key head, then every value head."""
    q, kv = config.q_size, config.kv_size
    return kernel[..., :q], kernel[..., q:q + kv], kernel[..., q + kv:]


def fuse_qkv(q, k, v):
    return np.concatenate([q, k, v], axis=-1)


# Which Flax leaf each Hugging Face tensor comes from, and how (per layer ``i`` for stacked leaves).
_LAYER_SOURCES = {
    "input_layernorm": ("layers/attn_norm/scale", "norm"),
    "self_attn.q_proj": ("layers/attn/qkv/kernel", "q"),
    "self_attn.k_proj": ("layers/attn/qkv/kernel", "k"),
    "self_attn.v_proj": ("layers/attn/qkv/kernel", "v"),
    "self_attn.o_proj": ("layers/attn/o/kernel", "transpose"),
    "post_attention_layernorm": ("layers/mlp_norm/scale", "norm"),
    "mlp.gate_proj": ("layers/mlp/gate/kernel", "transpose"),
    "mlp.up_proj": ("layers/mlp/up/kernel", "transpose"),
    "mlp.down_proj": ("layers/mlp/down/kernel", "transpose"),
}
TRANSFORMS = {
    "layers/attn/qkv/kernel": "unstack, split the fused columns into q, k, v, transpose each",
    "layers/attn/o/kernel": "unstack, transpose",
    "layers/mlp/gate/kernel": "unstack, transpose",
    "layers/mlp/up/kernel": "unstack, transpose",
    "layers/mlp/down/kernel": "unstack, transpose",
    "layers/attn_norm/scale": "unstack, add 1 (the norm's offset)",
    "layers/mlp_norm/scale": "unstack, add 1 (the norm's offset)",
    "final_norm/scale": "add 1 (the norm's offset)",
    "embed/embedding": "as it is (and, tied, the output layer too: no lm_head.weight)",
    "lm_head/kernel": "transpose (only when the embeddings are not tied)",
}


def hf_names_of(path: str, config: LlamaConfig) -> list:
    """The Hugging Face tensors made from the Flax leaf ``path``."""
    if path == "embed/embedding":
        return ["model.embed_tokens.weight"]
    if path == "final_norm/scale":
        return ["model.norm.weight"]
    if path == "lm_head/kernel":
        return ["lm_head.weight"]
    parts = [part for part, (source, _) in _LAYER_SOURCES.items() if source == path]
    return [layer_name(i, part) for i in range(config.num_hidden_layers) for part in parts]


def leaf_to_hf(path: str, value, config: LlamaConfig, dtype=None) -> dict:
    """The Hugging Face tensors made from one Flax leaf (stacked leaves: one per layer), cast to ``dtype``."""
    cast = (lambda x: np.asarray(x).astype(_np_dtype(dtype))) if dtype else np.asarray
    value = np.asarray(value)
    if path == "embed/embedding":
        return {"model.embed_tokens.weight": cast(value)}
    if path == "final_norm/scale":
        return {"model.norm.weight": cast(norm_to_hf(value))}
    if path == "lm_head/kernel":
        return {"lm_head.weight": cast(transpose(value))}
    out = {}
    for i in range(config.num_hidden_layers):
        layer = value[i]  # unstack
        for part, (source, how) in _LAYER_SOURCES.items():
            if source != path:
                continue
            if how == "norm":
                tensor = norm_to_hf(layer)
            elif how == "transpose":
                tensor = transpose(layer)
            else:
                tensor = transpose(dict(zip("qkv", split_qkv(layer, config)))[how])
            out[layer_name(i, part)] = cast(tensor)
    return out


def leaf_from_hf(path: str, get, config: LlamaConfig, dtype=None):
    """One Flax leaf made from the Hugging Face tensors ``get(name)`` returns (the inverse of
    :func:`leaf_to_hf`): per-layer tensors stacked, q, k, v fused, weights transposed, norms less 1."""
    cast = (lambda x: np.asarray(x).astype(_np_dtype(dtype))) if dtype else np.asarray
    if path == "embed/embedding":
        return cast(get("model.embed_tokens.weight"))
    if path == "final_norm/scale":
        return cast(norm_from_hf(np.asarray(get("model.norm.weight"))))
    if path == "lm_head/kernel":
        return cast(transpose(get("lm_head.weight")))
    layers = []
    for i in range(config.num_hidden_layers):
        if path == "layers/attn/qkv/kernel":
            layer = fuse_qkv(*(transpose(get(layer_name(i, f"self_attn.{x}_proj"))) for x in "qkv"))
        else:
            part, how = next((p, h) for p, (s, h) in _LAYER_SOURCES.items() if s == path)
            tensor = np.asarray(get(layer_name(i, part)))
            layer = norm_from_hf(tensor) if how == "norm" else transpose(tensor)
        layers.append(cast(layer))
    return np.stack(layers)  # stack


def to_hf(params: dict, config: LlamaConfig, dtype=None) -> dict:
    """Every Hugging Face tensor, from the Flax leaves ``params`` (flat by path): the whole model at once."""
    out = {}
    for path in param_shapes(config):
        out.update(leaf_to_hf(path, params[path], config, dtype))
    return {name: out[name] for name in hf_shapes(config)}


def from_hf(tensors: dict, config: LlamaConfig, dtype=None) -> dict:
    """Every Flax leaf (flat by path), from the Hugging Face tensors."""
    return {path: leaf_from_hf(path, tensors.__getitem__, config, dtype) for path in param_shapes(config)}


# The silent mistakes of a conversion to Hugging Face's layout, as Lesson 9 plants them and the
# grader does (problem 9.3): each keeps every name and every shape, and changes the outputs.
MISTAKES = {
    "swapped": "two layers' mlp.gate_proj weights exchanged",
    "transpose": "a square weight (the last layer's o_proj) reshaped where it should have been transposed",
    "qkv_order": "the fused q, k, v columns split as q, v, k",
    "norm_offset": "the norms' scales copied without adding their 1",
    "tied_head": "lm_head.weight written as the embeddings (untied embeddings)",
    "rounded": "every weight rounded through bfloat16 on its way, stored as float32",
}


def plant_mistake(tensors: dict, params: dict, config: LlamaConfig, mistake: str) -> dict:
    """``tensors`` (a right conversion of ``params``) with ``mistake`` (a key of :data:`MISTAKES`, or
    ``""`` for none) planted."""
    out, last = dict(tensors), config.num_hidden_layers - 1
    if mistake == "swapped":
        a, b = (layer_name(i, "mlp.gate_proj") for i in (0, last))
        out[a], out[b] = tensors[b], tensors[a]
    elif mistake == "transpose":
        kernel = params["layers/attn/o/kernel"][last]
        if kernel.shape[0] != kernel.shape[1]:
            raise ValueError("the transpose mistake needs a square o_proj: hidden_size == heads * head_dim")
        out[layer_name(last, "self_attn.o_proj")] = np.ascontiguousarray(kernel)  # (in, out) read as (out, in)
    elif mistake == "qkv_order":
        for i in range(config.num_hidden_layers):
            k, v = (layer_name(i, f"self_attn.{x}_proj") for x in "kv")
            out[k], out[v] = tensors[v], tensors[k]
    elif mistake == "norm_offset":
        for i in range(config.num_hidden_layers):
            out[layer_name(i, "input_layernorm")] = params["layers/attn_norm/scale"][i]
            out[layer_name(i, "post_attention_layernorm")] = params["layers/mlp_norm/scale"][i]
        out["model.norm.weight"] = params["final_norm/scale"]
    elif mistake == "tied_head":
        if config.tie_word_embeddings:
            raise ValueError("the tied_head mistake needs untied embeddings")
        out["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    elif mistake == "rounded":
        import ml_dtypes

        out = {name: value.astype(ml_dtypes.bfloat16).astype(value.dtype) for name, value in tensors.items()}
    elif mistake:
        raise ValueError(f"unknown mistake {mistake!r}: one of {sorted(MISTAKES)}")
    return out


# ---------------------------------------------------------------------------------------------
# Sharded safetensors files and their index.

def plan_shards(sizes: dict, max_shard_bytes: int) -> list:
    """Tensor names grouped into files, in order, as ``huggingface_hub`` splits a state dict: a
    tensor larger than the limit alone in its file; otherwise a new file whenever the next tensor
    would take the current one over the limit."""
    shards, current, used = [], [], 0
    for name, nbytes in sizes.items():
        if nbytes > max_shard_bytes:
            shards.append([name])
            continue
        if current and used + nbytes > max_shard_bytes:
            shards.append(current)
            current, used = [], 0
        current.append(name)
        used += nbytes
    if current:
        shards.append(current)
    return shards


def shard_file_names(count: int) -> list:
    return [SINGLE] if count == 1 else [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]


def _write_file(path: str, tensors: dict) -> None:
    """One safetensors file, written by hand from contiguous arrays (safetensors' NumPy writer writes a
    view's buffer as it lies in memory, and its ``load`` reads no bfloat16 back): an 8-byte
    length, the JSON header (``{"format": "pt"}`` as its metadata, as ``save_pretrained`` writes),
    then each tensor's bytes, row-major."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, value in tensors.items():
        nbytes = value.nbytes
        header[name] = {"dtype": CODES[value.dtype.name], "shape": list(value.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for value in tensors.values():
            f.write(np.ascontiguousarray(value).tobytes())


def write_shards(folder: str, tensors, shapes: dict, dtype: str, max_shard_bytes: int) -> list:
    """Write the tensors ``tensors`` yields (``(name, array)``, in any order that fills files one
    after another: :func:`plan_shards`' on ``shapes``) as sharded safetensors files, and the index
    when there are several. Returns the files, in order. Only one file's tensors are held at a time."""
    itemsize = _np_dtype(dtype).itemsize
    sizes = {name: math.prod(shape) * itemsize for name, shape in shapes.items()}
    plan = plan_shards(sizes, max_shard_bytes)
    files = shard_file_names(len(plan))
    where = {name: n for n, names in enumerate(plan) for name in names}
    os.makedirs(folder, exist_ok=True)
    pending: dict = {n: {} for n in range(len(plan))}
    for name, value in tensors:
        n = where[name]
        pending[n][name] = np.asarray(value).astype(_np_dtype(dtype))
        if len(pending[n]) == len(plan[n]):  # that file is complete: write it, let its tensors go
            _write_file(os.path.join(folder, files[n]), {k: pending[n][k] for k in plan[n]})
            pending[n] = {}
    if len(files) > 1:
        index = {"metadata": {"total_size": sum(sizes.values())},
                 "weight_map": {name: files[where[name]] for name in shapes}}
        with open(os.path.join(folder, INDEX), "w") as f:
            json.dump(index, f, indent=2)
    return files


def write_config(folder: str, config: LlamaConfig, dtype: str) -> None:
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config.hf_config(dtype), f, indent=2)


def save_hf(folder: str, tensors: dict, config: LlamaConfig, dtype: str, max_shard_bytes: int) -> list:
    """A whole model's tensors (a dict, Hugging Face's names) as a checkpoint folder: shards, index, config."""
    files = write_shards(folder, tensors.items(), {k: v.shape for k, v in tensors.items()}, dtype, max_shard_bytes)
    write_config(folder, config, dtype)
    return files


# ---------------------------------------------------------------------------------------------
# Reading a folder, carefully: its files may come from anyone.

def _inside(folder: str, name) -> str:
    """The path of file ``name`` of the folder, if ``name`` is a plain file name there (no folder in
    it, no link), else HFFormatError."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise HFFormatError(f"the index names {name!r}: a shard must be a file name in the checkpoint's own folder")
    path = os.path.join(folder, name)
    try:
        st = os.lstat(path)
    except (OSError, ValueError):  # (ValueError: a name the file system cannot spell, a lone surrogate)
        raise HFFormatError(f"the index names {name!r}, which is not in the folder") from None
    if not stat.S_ISREG(st.st_mode):
        raise HFFormatError(f"{name!r} is not a plain file (a link or a folder): a shard must be a file of the folder itself")
    return path


def read_header(path: str) -> tuple:
    """A safetensors file's header, checked against the file: ``(tensors, data_start)`` where
    ``tensors`` maps each name to ``(dtype name, shape, begin, end)`` (offsets into the data)."""
    name = os.path.basename(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise HFFormatError(f"{name}: {size} bytes, shorter than a safetensors header's 8-byte length")
        n = int.from_bytes(head, "little")
        if n > min(MAX_HEADER, size - 8):
            raise HFFormatError(f"{name}: its header claims {n} bytes, but the file has {size - 8} after the length")
        try:  # as strictly as safetensors' own reader (ckptlab.stheader): no file safe_open refuses
            header = stheader.parse(f.read(n))
        except stheader.HeaderError as exc:
            raise HFFormatError(f"{name}: {exc}") from None
    data = size - 8 - n
    tensors = {}
    for key, entry in stheader.pairs(header):  # (a tensor named twice: each entry read, the last one kept)
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = DTYPES[entry["dtype"]], entry["shape"], entry["data_offsets"]
            if not all(type(s) is int and s >= 0 for s in shape) or type(begin) is not int or type(end) is not int:
                raise TypeError
            np.broadcast_to(np.zeros((), _np_dtype(dtype)), shape)  # a shape NumPy can hold (ValueError if not)
        except (KeyError, TypeError, ValueError):
            raise HFFormatError(f"{name}: tensor {key!r} has no readable dtype, shape and data_offsets") from None
        need = math.prod(shape) * _np_dtype(dtype).itemsize
        if not 0 <= begin <= end or end - begin != need:
            raise HFFormatError(f"{name}: tensor {key!r} claims bytes {begin}-{end}, but a {dtype} of shape "
                                f"{shape} is {need} bytes")
        tensors[key] = (dtype, tuple(shape), begin, end)
    spans = [(begin, end, key) for key, (_, _, begin, end) in tensors.items()]
    covered = 0
    for begin, end, key in sorted(spans):
        if begin != covered:
            raise HFFormatError(f"{name}: tensor {key!r} starts at byte {begin} of the data, but the one before it "
                                f"ends at {covered}: the tensors must follow one another, no gap, no overlap")
        covered = end
    if covered != data:
        raise HFFormatError(f"{name}: the header accounts for {covered} bytes of data, but the file holds {data}")
    return tensors, 8 + n


class HFCheckpoint:
    """A Hugging Face checkpoint folder, checked: its index (or single file), every file's header,
    and its config. ``checkpoint[name]`` reads one tensor (a memory map: only its bytes are read)."""

    def __init__(self, folder: str):
        if not os.path.isdir(folder) or os.path.islink(folder):
            raise HFFormatError(f"{folder} is not a folder")
        self.folder = folder
        index_path = os.path.join(folder, INDEX)
        if os.path.lexists(index_path):
            weight_map, self.total_size = self._read_index(index_path)
        elif os.path.lexists(os.path.join(folder, SINGLE)):
            weight_map, self.total_size = None, None
        else:
            raise HFFormatError(f"no {INDEX} and no {SINGLE} in the folder")
        files = sorted(set(weight_map.values())) if weight_map is not None else [SINGLE]
        self.files = {}
        self.where = {}
        for file in files:
            path = _inside(folder, file)
            tensors, start = read_header(path)
            self.files[file] = (path, tensors, start)
            for tensor in tensors:
                if tensor in self.where:
                    raise HFFormatError(f"{tensor!r} is in both {self.where[tensor]} and {file}")
                self.where[tensor] = file
        if weight_map is not None:
            for tensor, file in weight_map.items():
                if tensor not in self.files[file][1]:
                    raise HFFormatError(f"the index puts {tensor!r} in {file}, whose header does not hold it")
            extra = sorted(set(self.where) - set(weight_map))
            if extra:
                raise HFFormatError(f"{self.where[extra[0]]} holds {extra[0]!r}, which the index does not name")
        self.config = self._read_config()

    @staticmethod
    def _read_index(path: str) -> tuple:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > MAX_INDEX:
            raise HFFormatError(f"{INDEX} is not a plain file of at most {MAX_INDEX >> 20} MiB")
        try:
            with open(path, encoding="utf-8") as f:
                index = json.load(f)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise HFFormatError(f"{INDEX} is not JSON") from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise HFFormatError(f"{INDEX} has no weight_map of tensor names to file names")
        total = (index.get("metadata") or {}).get("total_size") if isinstance(index.get("metadata"), dict) else None
        return weight_map, total

    def _read_config(self):
        path = os.path.join(self.folder, "config.json")
        if not os.path.lexists(path):
            return None
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.path.getsize(path) > MAX_INDEX:
            raise HFFormatError("config.json is not a plain file")
        try:
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise HFFormatError("config.json is not JSON") from None
        if not isinstance(config, dict):
            raise HFFormatError("config.json is not a JSON object")
        return config

    def names(self) -> list:
        return list(self.where)

    def data_bytes(self) -> int:
        return sum(end - begin for _, tensors, _ in self.files.values() for _, _, begin, end in tensors.values())

    def metadata(self, file: str) -> dict:
        """A file's ``__metadata__`` (``{}`` if none)."""
        path = self.files[file][0]
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            meta = stheader.parse(f.read(n)).get("__metadata__")  # (read_header parsed it already)
        return dict(meta) if isinstance(meta, dict) else {}

    def dtype(self, name: str) -> np.dtype:
        return _np_dtype(self.files[self.where[name]][1][name][0])

    def shape(self, name: str) -> tuple:
        return self.files[self.where[name]][1][name][1]

    def __getitem__(self, name: str) -> np.ndarray:
        path, tensors, start = self.files[self.where[name]]
        dtype, shape, begin, _ = tensors[name]
        if math.prod(shape) == 0:
            return np.zeros(shape, _np_dtype(dtype))
        return np.memmap(path, dtype=_np_dtype(dtype), mode="r", offset=start + begin, shape=shape)


def open_hf(folder: str) -> HFCheckpoint:
    """A Hugging Face checkpoint folder, checked (HFFormatError says what is wrong)."""
    return HFCheckpoint(folder)

