"""The grading engine: it decides scores and never runs learner code.

- :mod:`~autograder.engine.extract`: finding each problem's function in a submission (notebooks and
  ``.py`` files) and the code it needs, by reading, never running, it;
- :mod:`~autograder.engine.cases`: a learner's hidden cases (salted) and the expected outcomes;
- :mod:`~autograder.engine.judge`: the pure judge, from a worker's plain-data outputs to a status and
  a message that shows no hidden data;
- :mod:`~autograder.engine.results`: what grading returns (``ProblemResult``, ``Report``);
- :mod:`~autograder.engine.grade`: the run itself: plans, references, workers in the sandbox;
- :mod:`~autograder.engine.preempted`: problem 5.3's runs, a series of workers per case that this
  side kills with SIGKILL at planned points and starts again on the folder the last one left.

The front ends (CLI, batch, Gradescope, nbgrader, release, practice, drills, progress, notebook
checks) call :func:`autograder.engine.grade.grade`; learner code runs only in
``autograder/sandbox/inside.py``.
"""
