"""Where learner code runs, and the wall around it. The trust boundary of the grader:

- :mod:`~autograder.sandbox.inside` is the only code that runs learner code; it runs in the worker
  process, inside the jail, and nothing it says is trusted.
- :mod:`~autograder.sandbox.jail` builds that jail from kernel mechanisms (Landlock, seccomp,
  namespaces, resource limits) in the worker before any learner code runs: Landlock's rules in
  :mod:`~autograder.sandbox.landlock`, seccomp's filters in :mod:`~autograder.sandbox.seccomp`,
  the C library's calls they make in :mod:`~autograder.sandbox.syscalls`.
- :mod:`~autograder.sandbox.wire` carries bounded frames between the two sides.
- :mod:`~autograder.sandbox.outside` is the grader's side: it starts workers, feeds them cases,
  checks their frames, counts what they read, and kills them.

Everything else in :mod:`autograder` judges and never runs learner code.
"""
