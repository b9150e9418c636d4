"""What crosses the wall between the grader and a worker running learner code, in one place.

- :mod:`~autograder.wall.codec`: the plain data that crosses (JSON with tagged arrays), meshes and
  specs as arguments (``MeshArg``, ``SpecArg``), and walking an argument tree;
- :mod:`~autograder.wall.files`: file arguments (``CheckpointArg``, ``SafetensorsArg``), written on
  the grader's side before a worker reads them;
- :mod:`~autograder.wall.returns`: what each problem must return, and how a return is compared;
- :mod:`~autograder.wall.reads`: reading files with memory maps off, for read-counted problems.

Both sides import these (the worker's side only after its jail is up); none of them imports the
sandbox, the engine or the course's content.
"""
