"""What crosses the wall between the grader and a worker running learner code, in one place.

- :mod:`~autograder.wall.kinds` (a package, its modules by family): every kind of argument beyond
  plain data: meshes, specs and abstract arrays built in the worker (``MeshArg``, ``SpecArg``,
  ``AbstractArg``), and the files and folders the grader makes for it (``CheckpointArg``,
  ``SafetensorsArg``, ``RunFolder``, ...), each declared once, in its class: what it holds, its words
  and how its files are made; :mod:`~autograder.wall.words`: an argument in the learner's terms, as
  a public example shows it (a mesh, a spec, a checkpoint folder and what it holds), by its kind's words;
- :mod:`~autograder.wall.codec`: the plain data that crosses (JSON with tagged arrays, meshes and
  specs as arguments), and walking an argument tree;
- :mod:`~autograder.wall.files`: file arguments written on the grader's side before a worker reads
  them (``realize``, each as its kind makes it), and removed after;
- :mod:`~autograder.wall.returns`: what each problem must return, and how a return is compared: the
  contract every return spec keeps (``ReturnSpec``) and the generic specs;
  :mod:`~autograder.wall.problem_returns`: the specs written for one problem each (Unit 9's in
  :mod:`~autograder.wall.hf_returns`; the training runs of 5.3 and 8.3 in
  :mod:`~autograder.wall.run_returns`, whose public examples run in the learner's own process, 8.3's
  sent a real SIGTERM during an evaluation by :mod:`~autograder.wall.grace`; problem 10.2's plan of
  checkpoint tiers, judged by simulating it, in :mod:`~autograder.wall.plan_returns`);
- :mod:`~autograder.wall.reads`: reading files with memory maps off, for read-counted problems;
- :mod:`~autograder.wall.memory`: the memory-measured problems' budgets and the worker's preparation
  before its baseline;
- :mod:`~autograder.wall.libraries`: the libraries learner code may import;
- :mod:`~autograder.wall.reader` and :mod:`~autograder.wall.plant`: the code of the grader's own
  workers that read back a written checkpoint (6.2, 7.4; a Hugging Face folder, 9.1) and plant a
  state in a run folder (5.3, 8.3; a public example's, in the learner's process).

Both sides import these (the worker's side only after its jail is up); none of them imports the
sandbox, the engine or the course's content.
"""
