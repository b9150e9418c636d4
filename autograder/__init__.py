"""The course autograder: one registry of problems, a sandboxed worker, and a judge.

Learner code only ever runs in :mod:`autograder.worker` processes; the judging and the scores
are computed here, from plain data the worker sends back.
"""
