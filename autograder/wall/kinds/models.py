"""Unit 9's model (:mod:`ckptlab.llama`), as the grader saves it: a sharded Orbax checkpoint
(:class:`LlamaCheckpointArg`) and a Hugging Face folder (:class:`HFFolderArg`), the same weights
from the same seed."""

from __future__ import annotations

import math
import os
import uuid
from dataclasses import dataclass

from autograder.wall.kinds.base import FileKind
from autograder.wall.kinds.checkpoints import CheckpointArg, saved_on


def _llama_config_in_words(config: tuple) -> str:
    c = dict(config)
    return (f"{c.get('num_hidden_layers', 2)} layers, hidden_size {c.get('hidden_size', 64)}, "
            f"{c.get('num_attention_heads', 4)} heads of {c.get('head_dim', 16)} ({c.get('num_key_value_heads', 2)} "
            f"key-value heads), intermediate_size {c.get('intermediate_size', 128)}, vocab {c.get('vocab_size', 256)}, "
            f"embeddings {'tied' if c.get('tie_word_embeddings', True) else 'not tied'}")


@dataclass(frozen=True)
class LlamaCheckpointArg(CheckpointArg):
    """Unit 9's model (:mod:`ckptlab.llama`) saved as a sharded Orbax checkpoint: its weights drawn
    from ``seed`` (:func:`ckptlab.llama.random_params`), ``config`` a :class:`ckptlab.llama.LlamaConfig`'s
    fields as pairs, ``tree`` one of :data:`ckptlab.llama.TREES` (an NNX model's pure dict, its
    ``nnx.State`` saved as it is, a Linen model's variables). Each leaf is split over ``mesh``'s one axis on its
    second-to-last dimension, else its last (a vector's one), as FSDP training saves it."""

    arrays: tuple = ()
    mesh: tuple = (("x", 8),)
    seed: int = 0
    config: tuple = ()
    tree: str = "nnx"

    def llama_config(self):
        from ckptlab.llama import LlamaConfig

        return LlamaConfig(**dict(self.config))

    def params(self) -> dict:
        from ckptlab.llama import random_params

        return random_params(self.llama_config(), self.seed)

    def largest_leaf_bytes(self) -> int:
        from ckptlab.llama import param_shapes

        return max(math.prod(shape) for shape in param_shapes(self.llama_config()).values()) * 4

    def placed(self) -> dict:
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh
        from ckptlab.llama import fsdp_spec, nest, tree_paths

        mesh, (axis, size), params = course_mesh(dict(self.mesh)), self.mesh[0], self.params()
        where = tree_paths(self.tree, params)
        return nest({where[p]: jax.device_put(v, NamedSharding(mesh, PartitionSpec(*fsdp_spec(v.shape, axis, size))))
                     for p, v in params.items()})

    def words(self) -> str:
        tree = {"linen": "a Linen model's variables (every leaf under 'params')",
                "nnx_state": "an NNX model's state saved as it is (each leaf's path ending in 'value')",
                "nnx": "an NNX model's pure dict"}[self.tree]
        return (f"<a checkpoint folder (Orbax StandardCheckpointer) of ckptlab.llama's model, "
                f"{_llama_config_in_words(self.config)}, as {tree}, {saved_on(self)}>")


@dataclass(frozen=True)
class HFFolderArg(FileKind):
    """Unit 9's model in Hugging Face's layout (:mod:`ckptlab.hf`): sharded safetensors files under
    ``max_shard_bytes`` and their index (one ``model.safetensors`` and no index when it all fits in
    one), and ``config.json``, the weights drawn from ``seed`` as
    :class:`LlamaCheckpointArg` draws them (the same seed, the same model), stored in ``dtype``.
    ``mistake`` (a key of :data:`ckptlab.hf.MISTAKES`) plants a silent conversion mistake: every name
    and shape right, the model's outputs changed."""

    config: tuple
    seed: int
    dtype: str = "float32"
    max_shard_bytes: int = 2**15
    mistake: str = ""

    def llama_config(self):
        from ckptlab.llama import LlamaConfig

        return LlamaConfig(**dict(self.config))

    def tensors(self) -> dict:
        from ckptlab.hf import plant_mistake, to_hf
        from ckptlab.llama import random_params

        config = self.llama_config()
        params = random_params(config, self.seed)
        return plant_mistake(to_hf(params, config), params, config, self.mistake)

    def save(self, directory: str) -> str:
        from ckptlab.hf import save_hf

        save_hf(directory, self.tensors(), self.llama_config(), self.dtype, self.max_shard_bytes)
        return directory

    def realize(self, workdir: str, made=None) -> str:
        return self.save(os.path.join(workdir, f"ckpt-hf-{uuid.uuid4().hex[:12]}"))

    def words(self) -> str:
        from ckptlab.hf import MISTAKES

        how = f"converted with {MISTAKES[self.mistake]}" if self.mistake else "converted correctly"
        return (f"<a Hugging Face folder (config.json, safetensors files of at most {self.max_shard_bytes} bytes and "
                f"their index, or one model.safetensors) holding the same model in {self.dtype}, {how}>")
