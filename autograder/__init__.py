"""The course autograder: one registry of problems, a sandboxed worker, and a judge.

Learner code only ever runs in :mod:`autograder.sandbox.inside`, in an isolated worker process
(:mod:`autograder.sandbox`); the judging, the scores and every measurement they depend on are
computed here, from plain data the worker sends back. See SECURITY.md.
"""
