"""Shared code for the sharded-checkpointing course: device set-up, layout math, figures, models.

Importing this package does not import JAX: call :func:`setup_devices` first, before anything
else touches JAX, so that the 16 simulated CPU devices can still be created.

Its modules, by what they are (``tests/test_architecture.py`` holds the grader to it: the grader
imports the shared code, the measuring tools and the problems' own models, never a lesson's module
or the tool, so that a fix to a lesson cannot move a baseline):

- shared: `ckptlab.devices` (the 16 devices), `ckptlab.layout` (layout math), `ckptlab.models`
  (small Flax models), `ckptlab.plotting` (every figure), `ckptlab.steps` (a CheckpointManager's
  step folders, as Orbax names them, and which committed), `ckptlab.adapters` (the only doors into
  the libraries' private names);
- measuring tools: `ckptlab.memory` (a peak of host memory, measured as the grader measures it),
  `ckptlab.readcount` (bytes read, as the kernel counts them);
- the problems' own models, lessons' too: `ckptlab.training` (Lesson 5's run, problem 5.3's),
  `ckptlab.preempt` (Lesson 5's killed savers, problem 5.2's roots: the grader takes its saver
  alone), `ckptlab.unstacking` (Lesson 7's scanned model, problem 7.4's);
- the lessons' own: `ckptlab.explore` (the shard-placement explorer), `ckptlab.serving` (Lesson 6),
  `ckptlab.twohost` (two real hosts), `ckptlab.topology` (another machine's devices),
  `ckptlab.memcount`, `ckptlab.restorecount` and `ckptlab.loadcount` (a re-shard's memory, a
  restore's and Orbax's safetensors loader's reads, in fresh processes), `ckptlab.claims` (a lesson's
  claims, checked);
- the tool (``python -m ckptlab``, `ckptlab.__main__`): `ckptlab.cli`, `ckptlab.inspection`,
  `ckptlab.planning`, `ckptlab.diffing`, `ckptlab.files`, `ckptlab.untrusted`.
"""

from ckptlab.devices import NUM_DEVICES, DeviceSetupError, setup_devices

__all__ = ["NUM_DEVICES", "DeviceSetupError", "setup_devices"]
