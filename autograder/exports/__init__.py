"""The course written for where it is taught:

- :mod:`autograder.exports.release`: the learner bundle (no references, no hidden tests);
- :mod:`autograder.exports.problem_notebooks`: the problem notebooks, built from the registry;
- :mod:`autograder.exports.gradescope`: Gradescope's autograder zip, tried here as Gradescope runs it;
- :mod:`autograder.exports.nbgrader_course`: an nbgrader course; its test cell in
  :mod:`autograder.exports.nbgrader_cell`, its autograding by the course's grader in
  :mod:`autograder.exports.nbgrader_autograde`, its collect on an exchange several accounts share
  in :mod:`autograder.exports.nbgrader_exchange`;
- :mod:`autograder.exports.hub`: a class on one machine's JupyterHub, its users' environments from
  :mod:`autograder.exports.shared_python` (the course's Python and packages, not its references);
- :mod:`autograder.exports.revision`: each lesson's revision sheet.
"""
