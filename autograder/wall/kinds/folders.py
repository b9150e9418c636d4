"""Folders the learner's code writes in, in the worker's own scratch folder: a training run's
(:class:`RunFolder`, problems 5.3 and 8.3) and a function's output (:class:`OutputFolder`, problem
6.2). Neither is made beforehand: the learner's code gets a path that does not exist yet."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from autograder.wall.kinds.base import FileKind, RealizedPath, plural


class RunPath(RealizedPath):
    """A realized :class:`RunFolder`: its path, still carrying the seed of the state the grader
    plants (for the hidden tests' expected value, computed on this side). A worker gets the path
    alone (it travels as a plain string); a copy elsewhere keeps the seed."""

    def __new__(cls, path: str, plant: int = 0):
        self = super().__new__(cls, path)
        self.plant = int(plant)
        return self

    def moved(self, path: str) -> str:
        return RunPath(path, self.plant)


@dataclass(frozen=True)
class RunFolder(FileKind):
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

    def realize(self, workdir: str, made=None) -> str:
        # not made: the run makes it, in the scratch folder it writes
        return RunPath(os.path.join(workdir, "scratch", f"run-{uuid.uuid4().hex[:12]}"), self.plant)

    def words(self) -> str:
        # (``plant`` stays unsaid: the grader's own, hidden)
        if self.left_at:
            text = (f"<a path for the run's checkpoints where this same function has already run once, with "
                    f"total_steps {self.left_at}, to its end (its last step, {self.left_at}, committed): this call "
                    "is the run started again there")
        else:
            text = "<a path for the run's checkpoints (a fresh folder: it does not exist yet)"
        if self.grace:
            kills = [f"during the evaluation after a save of a step at least {k} beyond where it started"
                     if point == "term_eval" else f"during a save of a step at least {k} beyond where it started"
                     for point, k in self.kills]
            text += (f"; the grader sends the run a SIGTERM {', then '.join(kills)}, a SIGKILL {self.grace:g} s "
                     "later if it still runs, and starts it again each time")
        elif self.kills:
            kills = [f"once {plural(k, 'step')} beyond where it started had committed" if point == "commit"
                     else f"during a save of a step at least {k} beyond where it started" for point, k in self.kills]
            text += "; the grader kills the run with SIGKILL " + ", then ".join(kills) + ", starting it again each time"
        return text + ">"


@dataclass(frozen=True)
class OutputFolder(FileKind):
    """Where a function writes a checkpoint (problem 6.2): a path in the worker's scratch folder that
    does not exist yet. The learner's code gets the path alone; the grader reads back what it wrote
    (:mod:`autograder.engine.readback`)."""

    def realize(self, workdir: str, made=None) -> str:
        # not made: the function writes it (its parent exists)
        os.makedirs(os.path.join(workdir, "scratch"), exist_ok=True)
        return os.path.join(workdir, "scratch", f"out-{uuid.uuid4().hex[:12]}")

    def words(self) -> str:
        return "<a path to write the checkpoint to (it does not exist yet)>"
