"""The grading engine: it decides scores and never runs learner code.

- :mod:`~autograder.engine.extract`: finding each problem's function in a submission (notebooks and
  ``.py`` files) and the code it needs, by reading, never running, it;
- :mod:`~autograder.engine.locate`: what can be said of a problem without running it (not attempted,
  a forbidden module);
- :mod:`~autograder.engine.cases`: a learner's hidden cases (salted) and the expected outcomes;
- :mod:`~autograder.engine.plan`: one problem on its way through grading (``Plan``), the trusted
  side's work for it as futures;
- :mod:`~autograder.engine.grade`: the run itself: plans, the references' thread, runners, the judge;
- :mod:`~autograder.engine.trusted_side`: the references' own work (cases' files written, expected
  outcomes computed) in short-lived processes forked from a server of the grader's, so the process
  that holds a class keeps none of what they used;
- :mod:`~autograder.engine.shared`: a class graded on the same hidden cases, the trusted side's work
  on them done once for all (``grade-batch --shared-cases``);
- :mod:`~autograder.engine.runners`: how a problem's cases run, by its mode: one worker, or
  :mod:`~autograder.engine.readback` (its checkpoint read back by a worker of the grader's), or
  :mod:`~autograder.engine.preempted` (problem 5.3: a series of workers per case that this side kills
  with SIGKILL at planned points and starts again on the folder the last one left);
- :mod:`~autograder.engine.judge`: the pure judge, from a worker's plain-data outputs to a status and
  a message that shows no hidden data;
- :mod:`~autograder.engine.results`: what grading returns (``ProblemResult``, ``Report``);
- :mod:`~autograder.engine.gil`: the GIL's switch interval while grading.

The front ends (CLI, batch, Gradescope, nbgrader, release, practice, drills, progress, notebook
checks) call :func:`autograder.engine.grade.grade`; learner code runs only in
``autograder/sandbox/inside.py``.
"""
