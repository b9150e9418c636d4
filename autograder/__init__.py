"""The course autograder: one registry of problems, a sandboxed worker, and a judge.

Learner code only ever runs in :mod:`autograder.sandbox.inside`, in an isolated worker process
(:mod:`autograder.sandbox`); the judging, the scores and every measurement they depend on are
computed here, from plain data the worker sends back. See SECURITY.md.

The house, in wings (``WINGS``), each a package with its own map, from the top floor down
(``FLOORS``): a module imports its own wing and the floors below it, and a wing of the same floor
only where ``ACROSS`` says why.

- the front door: :mod:`autograder.__main__` and :mod:`autograder.cli` (``python -m autograder``,
  every command);
- :mod:`autograder.learner`: what a learner uses (notebook checks and hints, public examples,
  practice, progress, the live report, drills), with thin faces at the paths learners type:
  :mod:`autograder.notebook`, :mod:`autograder.progress`, :mod:`autograder.drills`;
- :mod:`autograder.classroom`: a class graded (the batch, item analysis, similarity);
- :mod:`autograder.exports`: the course written for other platforms (the learner bundle, Gradescope,
  nbgrader, problem notebooks, revision sheets);
- :mod:`autograder.engine`: grading (cases, references, runners, the judge);
- the content: :mod:`autograder.registry` (the problems, and the questions every wing asks of them:
  which problems a selection names, whether the hidden tests are installed, a problem's stub),
  :mod:`autograder.declarations` (what a unit declares), ``autograder.units`` (one file a unit) and
  ``autograder.hidden`` (its hidden cases);
- :mod:`autograder.sandbox`: where learner code runs;
- :mod:`autograder.wall`: what crosses to a worker;
- the ground: :mod:`autograder.source` (what a source says, unrun), :mod:`autograder.limits`,
  :mod:`autograder.text` (names a learner chose, made safe), :mod:`autograder.outputs` (labels,
  whole-file writes), :mod:`autograder.stack` (the pinned stack) and :mod:`autograder.invoke` (who is
  grading; the autograder run in a fresh process).
"""

# Each wing's modules and packages, by name under ``autograder``; the faces ride with their wing.
WINGS = {
    "front door": ("__main__", "cli"),
    "learner": ("learner", "notebook", "progress", "drills"),
    "classroom": ("classroom",),
    "exports": ("exports",),
    "engine": ("engine",),
    "content": ("registry", "declarations", "units", "hidden"),
    "sandbox": ("sandbox",),
    "wall": ("wall",),
    "ground": ("source", "limits", "text", "outputs", "stack", "invoke"),
}
FLOORS = (("front door",), ("learner", "classroom", "exports"), ("engine",), ("content",), ("sandbox",), ("wall",),
          ("ground",))
# Imports between wings of one floor, each with its reason; any other is refused.
ACROSS = {
    ("exports", "learner"): "nbgrader's test cell runs a problem's public examples where the hidden tests "
                            "are absent, as the notebook's check does",
}
