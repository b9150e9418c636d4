"""A class graded, for its instructor:

- :mod:`autograder.classroom.batch`: every learner's submission graded (``grade-batch``), the
  gradebook, feedback and the summary;
- :mod:`autograder.classroom.item_analysis`: which problems a class fails, and whether they tell
  strong learners from weak ones;
- :mod:`autograder.classroom.similarity`: which learners' code is alike beyond what a problem forces.
"""
