"""The path a learner types: ``from autograder.drills import drill`` (the drills live in
:mod:`autograder.learner.drills`)."""

from autograder.learner.drills import Question, drill

__all__ = ["Question", "drill"]
