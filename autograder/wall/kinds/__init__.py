"""The kinds of argument a problem's cases hold beyond plain data, every one by its public name here.

- Built in the worker from what crosses the wall (:mod:`~autograder.wall.codec` encodes them and
  builds the JAX objects): a mesh (``MeshArg``), a ``PartitionSpec`` (``SpecArg``), an abstract
  array (``AbstractArg``): :mod:`~autograder.wall.kinds.built`.
- Files and folders the grader makes, fresh for each learner, in the worker's own temporary
  directory before the worker reads them (:func:`~autograder.wall.files.realize` writes them and
  passes their paths): :data:`FILE_KINDS`. Checkpoints (``CheckpointArg``, ``TrainingCheckpointArg``,
  ``TreeCheckpointArg``: :mod:`~autograder.wall.kinds.checkpoints`), a safetensors file
  (``SafetensorsArg``: :mod:`~autograder.wall.kinds.tensor_files`), Unit 9's model as Orbax and
  Hugging Face save it (``LlamaCheckpointArg``, ``HFFolderArg``: :mod:`~autograder.wall.kinds.models`),
  checkpoint roots real savers left (``PreemptedRootArg``, ``TieredRootArg``:
  :mod:`~autograder.wall.kinds.roots`), a run's folder and an output folder (``RunFolder``,
  ``OutputFolder``: :mod:`~autograder.wall.kinds.folders`).

Each kind is declared once, in its class (:mod:`~autograder.wall.kinds.base` says what every one
defines): what it holds (values drawn from a seed, so that the reference and the learner read the
same data), what it is in the learner's terms (``words``: :mod:`autograder.wall.words` shows an
argument by them) and, for a file, how it is made (``realize``, and ``make_together`` for those one
helper process makes: :mod:`autograder.wall.files` calls them): trusted code, run on the grader's
side only. The worker imports this package through the codec, for the first three (NumPy alone at
import: everything else is imported where it is used).

Every kind's public name is here (``autograder.wall.kinds.X``, its ``__module__`` too, wherever its
family module defines it): a pickle, a test and a reader find it in one place.
"""

from __future__ import annotations

from autograder.wall.kinds.base import (
    MOST_SHOWN,
    ORBAX,
    ArgumentKind,
    FileKind,
    RealizedPath,
    named_dtype,
)
from autograder.wall.kinds.built import AbstractArg, MeshArg, SpecArg
from autograder.wall.kinds.checkpoints import CheckpointArg, TrainingCheckpointArg, TreeCheckpointArg
from autograder.wall.kinds.folders import OutputFolder, RunFolder, RunPath
from autograder.wall.kinds.models import HFFolderArg, LlamaCheckpointArg
from autograder.wall.kinds.roots import PreemptedRootArg, TieredPath, TieredRootArg
from autograder.wall.kinds.tensor_files import CORRUPT, DAMAGE, TRUNCATED, SafetensorsArg

# Every kind of argument (a new one is added here, and declares its words, and its files, in its class).
KINDS = (MeshArg, SpecArg, AbstractArg, CheckpointArg, TrainingCheckpointArg, TreeCheckpointArg, SafetensorsArg,
         PreemptedRootArg, TieredRootArg, RunFolder, OutputFolder, LlamaCheckpointArg, HFFolderArg)
FILE_KINDS = (CheckpointArg, SafetensorsArg, HFFolderArg, PreemptedRootArg, TieredRootArg, RunFolder, OutputFolder)  # (and their subclasses)

for _kind in KINDS:
    _kind.__module__ = __name__  # (its public name: pickles name it here, whichever module defines it)
del _kind

__all__ = [
    "CORRUPT", "DAMAGE", "FILE_KINDS", "KINDS", "MOST_SHOWN", "ORBAX", "TRUNCATED", "AbstractArg", "ArgumentKind",
    "CheckpointArg", "FileKind", "HFFolderArg", "LlamaCheckpointArg", "MeshArg", "OutputFolder", "PreemptedRootArg",
    "RealizedPath", "RunFolder", "RunPath", "SafetensorsArg", "SpecArg", "TieredPath", "TieredRootArg",
    "TrainingCheckpointArg", "TreeCheckpointArg", "named_dtype",
]
