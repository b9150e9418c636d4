"""The path a learner types: ``from autograder.progress import show_progress`` (the record lives in
:mod:`autograder.learner.progress`)."""

from autograder.learner.progress import show_progress

__all__ = ["show_progress"]
