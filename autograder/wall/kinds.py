"""The kinds of argument a problem's cases hold beyond plain data, every one in one place.

- Built in the worker from what crosses the wall (:mod:`~autograder.wall.codec` encodes them and
  builds the JAX objects): a mesh (``MeshArg``), a ``PartitionSpec`` (``SpecArg``), an abstract
  array (``AbstractArg``).
- Files and folders the grader makes, fresh for each learner, in the worker's own temporary
  directory before the worker reads them (:func:`~autograder.wall.files.realize` writes them and
  passes their paths): checkpoints (``CheckpointArg``, ``TrainingCheckpointArg``,
  ``TreeCheckpointArg``), a safetensors file (``SafetensorsArg``), a checkpoint root left by a
  killed saver (``PreemptedRootArg``), a run's folder (``RunFolder``), an output folder
  (``OutputFolder``): :data:`FILE_KINDS`.

Each says what it holds (values drawn from a seed, so that the reference and the learner read the
same data) and, for a file, how it is saved: trusted code, run on the grader's side only. The worker
imports this module through the codec, for the first three. What each is in the learner's terms, as
a public example shows it: :mod:`autograder.wall.words`.
"""

from __future__ import annotations

import json
import math
import os
import threading
import uuid
from dataclasses import dataclass
from functools import cached_property

import numpy as np

# Orbax is not safe to run from two threads of one process at once: its saves share barrier keys
# and temporary folder steps process-wide (two learners' 3.3 references graded at once by
# grade-batch -j 2 failed with FileExistsError on '...orbax-checkpoint-tmp' and TimeoutError on
# 'awaitable_signals_contract_N/step_directory_creation'). Every save and restore on the trusted
# side takes its turn under this lock.
ORBAX = threading.RLock()


def named_dtype(name) -> np.dtype:
    """A dtype by its name, bfloat16 (ml_dtypes') included."""
    import ml_dtypes  # noqa: F401 - registers bfloat16 with NumPy

    return np.dtype(name)


@dataclass(frozen=True)
class MeshArg:
    """A mesh to build in the worker: ``{axis: size}`` over the first devices, row-major."""

    axes: tuple  # ((name, size), ...)

    @property
    def shape(self) -> dict:
        return dict(self.axes)


@dataclass(frozen=True)
class SpecArg:
    """A ``PartitionSpec`` to build in the worker."""

    entries: tuple


@dataclass(frozen=True)
class AbstractArg:
    """A ``jax.ShapeDtypeStruct`` (an array's shape and dtype, no values) to build in the worker: a
    model's abstract tree, as ``jax.eval_shape`` gives it."""

    shape: tuple
    dtype: str


@dataclass(frozen=True)
class CheckpointArg:
    """A checkpoint saved with Orbax's StandardCheckpointer (OCDBT) on a mesh over the first devices.

    ``arrays`` is ``((name, shape, dtype, spec_entries), ...)``; ``mesh`` is ``((axis, size), ...)``.
    Values are drawn from ``seed``, so the reference and the learner read the same data.
    """

    arrays: tuple
    mesh: tuple
    seed: int

    def values(self) -> dict:
        rng = np.random.default_rng(self.seed)
        out = {}
        for name, shape, dtype, _ in self.arrays:
            dtype = named_dtype(dtype)
            if dtype.kind == "f" or dtype.name == "bfloat16":
                out[name] = rng.standard_normal(shape).astype(dtype)
            else:
                out[name] = rng.integers(-100, 100, size=shape).astype(dtype)
        return out

    def save(self, directory: str) -> str:
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh = course_mesh(dict(self.mesh))
        values = self.values()
        tree = {name: jax.device_put(values[name], NamedSharding(mesh, PartitionSpec(*spec)))
                for name, _, _, spec in self.arrays}
        with ORBAX:
            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory


@dataclass(frozen=True)
class TrainingCheckpointArg(CheckpointArg):
    """A training run's checkpoint, as Unit 6 starts from: ``{"params": ..., "opt_state": {"mu":
    ..., "nu": ...}, "step": ...}`` saved with Orbax's StandardCheckpointer on the training mesh.
    ``values()`` are the parameters (``arrays`` as for :class:`CheckpointArg`); the optimizer's
    moments have the parameters' shapes, dtypes and specs, drawn from ``seed`` too."""

    step: int = 1000

    def state(self) -> dict:
        params = self.values()
        rng = np.random.default_rng(self.seed + 1)
        moments = {k: {name: (rng.standard_normal(v.shape) * scale).astype(v.dtype) for name, v in params.items()}
                   for k, scale in (("mu", 1e-3), ("nu", 1e-6))}
        return {"params": params, "opt_state": moments, "step": np.int64(self.step)}

    def specs(self) -> dict:
        return {name: spec for name, _, _, spec in self.arrays}

    def save(self, directory: str) -> str:
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh, specs = course_mesh(dict(self.mesh)), self.specs()
        state = self.state()

        def place(path, value):
            spec = specs[path[-1].key] if np.ndim(value) else ()
            return jax.device_put(value, NamedSharding(mesh, PartitionSpec(*spec)))

        tree = jax.tree_util.tree_map_with_path(place, state)
        del state  # (the host copies: the grader's memory holds the devices' alone)
        with ORBAX:
            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory


@dataclass(frozen=True)
class TreeCheckpointArg(CheckpointArg):
    """A model's checkpoint as nested dicts, as training code saves one (Unit 7): ``arrays`` names
    each leaf by its path (``"params/layer0/kernel"``). Integers are drawn above what the float of
    their width holds exactly (2**24 for int32, 2**53 for int64), so that a cast shows. ``edits``
    change what ``seed`` draws, in order: two checkpoints of one model that differ as planted.
    Each leaf is placed as ``NamedSharding(mesh, PartitionSpec(*spec_entries))``.

    Edits: ``("drop", path)``, ``("add", path, shape, dtype)``, ``("cast", path, dtype)``,
    ``("reshape", path, shape)`` (new values), ``("scale", path, factor)``, ``("set", path, index,
    value)`` (one element of the flattened array)."""

    edits: tuple = ()

    def values(self) -> dict:
        def draw(rng, shape, dtype):
            dtype = named_dtype(dtype)
            if dtype.kind in "iu":
                low = {4: 2**24, 8: 2**53}.get(dtype.itemsize, 0)
                return rng.integers(low, np.iinfo(dtype).max // 2, size=shape, endpoint=True).astype(dtype)
            return rng.standard_normal(shape).astype(dtype)

        rng = np.random.default_rng(self.seed)
        out = {path: draw(rng, shape, dtype) for path, shape, dtype, _ in self.arrays}
        for number, (kind, path, *rest) in enumerate(self.edits):
            edit_rng = np.random.default_rng((self.seed, number))
            if kind == "drop":
                del out[path]
            elif kind == "add":
                out[path] = draw(edit_rng, *rest)
            elif kind == "cast":
                out[path] = out[path].astype(named_dtype(rest[0]))
            elif kind == "reshape":
                out[path] = draw(edit_rng, rest[0], out[path].dtype.name)
            elif kind == "scale":
                out[path] = (out[path].astype(np.float64) * rest[0]).astype(out[path].dtype)
            elif kind == "set":
                changed = out[path].copy()
                changed.reshape(-1)[rest[0]] = rest[1]
                out[path] = changed
            else:
                raise ValueError(f"unknown edit {kind!r}")
        return out

    def save(self, directory: str) -> str:
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh

        mesh = course_mesh(dict(self.mesh))
        specs = {path: spec for path, _, _, spec in self.arrays}
        tree: dict = {}
        for path, value in self.values().items():
            keys = path.split("/")
            where = tree
            for key in keys[:-1]:
                where = where.setdefault(key, {})
            # A 64-bit integer stays NumPy (JAX without x64 would make it int32), as a data
            # loader's counters are saved beside a model's jax.Arrays.
            big = value.dtype.kind in "iu" and value.dtype.itemsize == 8 and not jax.config.jax_enable_x64
            spec = PartitionSpec(*specs.get(path, ()))  # (a leaf an edit added: replicated)
            where[keys[-1]] = value if big else jax.device_put(value, NamedSharding(mesh, spec))
        with ORBAX:
            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory


# Damage a safetensors file can have, and the word a clear error about it must use.
TRUNCATED = ("short", "header_cut", "huge_length", "data_cut")
CORRUPT = ("bad_json", "not_object", "bad_utf8", "bad_entry", "bad_dtype", "bad_shape")


@dataclass(frozen=True)
class SafetensorsArg:
    """A safetensors file written with the ``safetensors`` package itself.

    ``tensors`` is ``((name, shape, numpy dtype name), ...)``; values are drawn from ``seed``.
    ``damage`` (one of :data:`TRUNCATED` or :data:`CORRUPT`) breaks the file on purpose.
    """

    tensors: tuple
    seed: int
    metadata: tuple = ()  # ((key, value), ...): the optional "__metadata__" of the header
    damage: str = ""

    def values(self) -> dict:
        rng = np.random.default_rng(self.seed)
        out = {}
        for name, shape, dtype in self.tensors:
            kind = np.dtype(dtype).kind
            if kind == "f":
                out[name] = rng.standard_normal(shape).astype(dtype)
            elif kind == "b":
                out[name] = rng.integers(0, 2, size=shape).astype(bool)
            else:
                info = np.iinfo(dtype)
                out[name] = rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
        return out

    def intact(self) -> bytes:
        return self._intact

    @cached_property
    def _intact(self) -> bytes:  # made once: judging a case asks for it several times
        from safetensors.numpy import save

        return save(self.values(), metadata=dict(self.metadata) or None)

    def header_size(self) -> int:
        """N, the header's length in bytes (data starts at 8 + N)."""
        return int.from_bytes(self.intact()[:8], "little")

    def header(self) -> dict:
        """The header as the file has it (``__metadata__`` included)."""
        return json.loads(self.intact()[8:8 + self.header_size()])

    def tensor_base(self, name: str) -> int:
        """Where tensor ``name`` starts in the file (safetensors orders tensors by alignment, then name)."""
        return 8 + self.header_size() + self.header()[name]["data_offsets"][0]

    def nbytes(self, name: str, bounds=None) -> int:
        """Bytes of tensor ``name``, or of its shard ``bounds``."""
        shape, dtype = next((s, d) for t, s, d in self.tensors if t == name)
        sizes = shape if bounds is None else [stop - start for start, stop in bounds]
        return math.prod(sizes) * np.dtype(dtype).itemsize

    def read_budget(self, name: str, bounds) -> int:
        """Bytes a read of shard ``bounds`` of ``name`` may take (see :func:`autograder.wall.reads.read_budget`)."""
        from autograder.wall.reads import read_budget

        return read_budget(self.header_size(), self.nbytes(name, bounds))

    def content(self) -> bytes:
        data = self.intact()
        if not self.damage:
            return data
        n = int.from_bytes(data[:8], "little")
        header, body = data[8:8 + n], data[8 + n:]
        damaged = {  # built for the damage asked only: each is a copy of the file (64 MiB in Unit 6)
            "short": lambda: data[:5],
            "header_cut": lambda: data[: 8 + n // 2],
            "huge_length": lambda: (2**40).to_bytes(8, "little") + data[8:],
            "data_cut": lambda: data[: 8 + n + len(body) // 2],
            "bad_json": lambda: data[:8] + b"{" + b"#" * (n - 1) + body,
            "not_object": lambda: data[:8] + b"[" + b" " * (n - 2) + b"]" + body,
            "bad_utf8": lambda: data[:8] + header[:2] + b"\xff\xfe" + header[4:] + body,
            "bad_entry": lambda: data[:8] + _break_entry(header, "data_offsets") + body,
            "bad_dtype": lambda: data[:8] + _break_entry(header, "dtype") + body,
            "bad_shape": lambda: data[:8] + _break_entry(header, "shape") + body,
        }
        return damaged[self.damage]()

    def save(self, directory: str) -> str:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"model-{uuid.uuid4().hex[:8]}.safetensors")
        with open(path, "wb") as f:
            f.write(self.content())
        if self.data_bytes() > 2**23:  # a big file's bytes are not kept in the grader's memory while it grades
            self.__dict__.pop("_intact", None)
        return path

    def data_bytes(self) -> int:
        """Bytes of the file's data section (every tensor's)."""
        return sum(self.nbytes(name) for name, _, _ in self.tensors)


def _break_entry(header: bytes, field: str) -> bytes:
    """The same header (same length), one tensor's ``field`` of another JSON type: "data_offsets" not
    [begin, end], a "dtype" not a str (an int), a "shape" not a list ("16x8"): each shorter, so it fits."""
    parsed = json.loads(header)
    entry = parsed[next(k for k in parsed if k != "__metadata__")]
    entry[field] = {"data_offsets": "x", "dtype": 4, "shape": "x".join(map(str, entry["shape"]))}[field]
    text = json.dumps(parsed, separators=(",", ":")).encode()
    assert len(text) <= len(header)
    return text.ljust(len(header))


@dataclass(frozen=True)
class PreemptedRootArg:
    """A checkpoint root a real saver left when it was killed (SIGKILL, from outside) at the point
    ``spec`` names (a :class:`ckptlab.preempt.SaverSpec`'s fields, ``root`` aside, as pairs).
    Every such argument of a :func:`~autograder.wall.files.realize` call is made by one helper process."""

    spec: tuple
    # What the grader does to the root once the saver is dead, in order: ``(kind, n)`` applies to
    # the newest ``n`` committed steps (0: all of them). ``"state_removed"``: the step's `state`
    # item taken away (the step still holds `data` and commit_success.txt); ``"state_unreadable"``:
    # its arrays' data files deleted, its records (`_METADATA`, the step's metadata) kept, so its
    # metadata reads and a restore fails; ``"data_removed"``: the `data` item taken away, `state`
    # left whole. A committed step that does not restore, and one that does although its other
    # item is gone.
    damage: tuple = ()

    def saver(self, root: str):
        from ckptlab.preempt import SaverSpec

        return SaverSpec(root=root, **dict(self.spec))


@dataclass(frozen=True)
class TieredRootArg:
    """Problem 8.2's folder: Orbax's emergency manager's tiers, saved by a real job of processes
    (:func:`ckptlab.tiers.make_tiers`; ``spec``: a ``TierSpec``'s fields as pairs), then ``damage``d.
    Orbax's own restore of it travels with the realized path (``files.TieredPath``), never inside it."""

    spec: tuple
    damage: tuple = ()

    def tier_spec(self):
        from ckptlab.tiers import TierSpec

        return TierSpec(**dict(self.spec))


@dataclass(frozen=True)
class RunFolder:
    """A folder for a training run's checkpoints, in the worker's own scratch folder (problem 5.3),
    and how the grader preempts the run (never sent: the learner's code gets the path alone).

    ``kills`` is ``((point, steps), ...)``, one per preemption, in order: ``("commit", k)`` kills
    the run once k steps beyond where it started have committed; ``("mid_save", k)`` once a save of a
    step at least k beyond where it started is under way. The folder outlives each worker: the next
    one, started with the same arguments, finds what the last one left. ``plant``, when not 0, seeds
    the state the grader plants in the latest committed step before the last run
    (:func:`autograder.engine.preempted.plant_state`): hidden, so no learner can compute it.

    ``left_at``, when not 0, makes the folder one a run has already trained in: before the case's
    run, the same function runs once in the fresh folder with ``total_steps=left_at``, to its end
    (its steps 1 to ``left_at`` committed), and the case's run starts again in what it left: it must
    go on from step ``left_at``, on the batches that come next. The notebook's check can kill no
    run (the learner's code runs in the kernel), so this is how a public example stops one
    (:meth:`autograder.wall.run_returns.ResumedRun.run_example`); the grader does the same
    (:func:`autograder.engine.preempted.run_case`), so the example means one thing in both."""

    kills: tuple = ()
    plant: int = 0
    left_at: int = 0
    # Problem 8.3: ``("term_save", k)`` sends a SIGTERM (not a SIGKILL) once a save of a step at least k
    # beyond where the run started is under way, ``("term_eval", k)`` as the run reads a batch of the
    # evaluation that follows a step at least k beyond (the grader paces it, and draws the batch from
    # ``plant``); a SIGKILL follows ``grace`` seconds later if the run still runs (engine/preempted.py).
    grace: float = 0.0

    def __repr__(self) -> str:
        # as the dataclass wrote it before left_at: the hidden cases' folders (left_at 0) read the same
        extra = f", left_at={self.left_at!r}" if self.left_at else ""
        extra += f", grace={self.grace!r}" if self.grace else ""
        return f"RunFolder(kills={self.kills!r}, plant={self.plant!r}{extra})"


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

    def save(self, directory: str) -> str:
        import jax
        import orbax.checkpoint as ocp
        from jax.sharding import NamedSharding, PartitionSpec

        from ckptlab.layout import course_mesh
        from ckptlab.llama import fsdp_spec, nest, tree_paths

        mesh, (axis, size), params = course_mesh(dict(self.mesh)), self.mesh[0], self.params()
        where = tree_paths(self.tree, params)
        tree = nest({where[p]: jax.device_put(v, NamedSharding(mesh, PartitionSpec(*fsdp_spec(v.shape, axis, size))))
                     for p, v in params.items()})
        with ORBAX:
            checkpointer = ocp.StandardCheckpointer()
            checkpointer.save(directory, tree)
            checkpointer.wait_until_finished()
        return directory


@dataclass(frozen=True)
class HFFolderArg:
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


@dataclass(frozen=True)
class OutputFolder:
    """Where a function writes a checkpoint (problem 6.2): a path in the worker's scratch folder that
    does not exist yet. The learner's code gets the path alone; the grader reads back what it wrote
    (:mod:`autograder.engine.readback`)."""


FILE_KINDS = (CheckpointArg, SafetensorsArg, HFFolderArg, PreemptedRootArg, TieredRootArg, RunFolder, OutputFolder)  # (and their subclasses)
