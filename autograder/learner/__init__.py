"""What a learner uses, in a notebook or a terminal:

- :mod:`autograder.learner.notebook`: a problem's check cell and hints in steps, in the kernel;
- :mod:`autograder.learner.public`: every problem's public examples on saved notebooks
  (``python -m autograder check``);
- :mod:`autograder.learner.practice`: timed practice sets (``python -m autograder practice``);
- :mod:`autograder.learner.progress`: where a learner stands, recorded locally;
- :mod:`autograder.learner.report`: what ``make check`` prints while it grades and after;
- :mod:`autograder.learner.drills`: quick numeric questions, a file of kinds per unit.

The paths learners type (``autograder.notebook``, ``autograder.progress``, ``autograder.drills``)
are thin faces over these.
"""
