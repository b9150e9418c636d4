"""The path a problem notebook types: ``from autograder.notebook import problem`` (the notebook checks
live in :mod:`autograder.learner.notebook`)."""

from autograder.learner.notebook import CheckFailed, CheckResult, problem

__all__ = ["CheckFailed", "CheckResult", "problem"]
