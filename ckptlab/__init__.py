"""Shared code for the sharded-checkpointing course: device set-up, layout math, figures, models.

Importing this package does not import JAX: call :func:`setup_devices` first, before anything
else touches JAX, so that the 16 simulated CPU devices can still be created.

Its modules, in wings (``WINGS`` below is the map; ``tests/house/test_architecture.py`` holds every
module to exactly one wing, and the wings to their rules):

- shared: the 16 devices (`ckptlab.devices`), layout math (`ckptlab.layout`), small Flax models
  (`ckptlab.models`), every figure (`ckptlab.plotting`), a CheckpointManager's step folders as Orbax
  names them (`ckptlab.steps`), a safetensors header read as strictly as the library reads it
  (`ckptlab.stheader`), and the only doors into the libraries' private names
  (`ckptlab.adapters`, `ckptlab.adapters.errors`, `ckptlab.adapters.jax_internals`,
  `ckptlab.adapters.orbax_internals`);
- measuring tools: host memory and its peak (`ckptlab.memory`), bytes read as the kernel counts them
  (`ckptlab.readcount`), a re-shard's memory, a restore's and Orbax's safetensors loader's reads in
  fresh processes (`ckptlab.memcount`, `ckptlab.restorecount`, `ckptlab.loadcount`), real hosts on
  localhost (`ckptlab.twohost`), an S3-compatible server counting each client's reads
  (`ckptlab.s3server`): the grader may import these;
- the problems' own models, the lessons' too: Lesson 5's run (`ckptlab.training`, problem 5.3's),
  its killed savers (`ckptlab.preempt`: the grader takes its saver alone, problem 5.2's), Lesson 7's
  scanned model (`ckptlab.unstacking`, problem 7.4's), Lesson 8's checkpoints in tiers, Orbax's
  emergency manager run on real processes (`ckptlab.tiers`, problem 8.2's), Lesson 9's Llama-shaped
  model (`ckptlab.llama`) and Hugging Face's layout and files (`ckptlab.hf`, Unit 9's), Lesson 10's
  frontier run simulated with SimPy from published figures (`ckptlab.frontier`: its closed forms
  `ckptlab.frontier.formulas`, its simulation `ckptlab.frontier.simulation` and Llama 3's figures
  `ckptlab.frontier.published`, Unit 10's);
- the lessons' own: the shard-placement explorer (`ckptlab.explore`), Lesson 6's serving
  (`ckptlab.serving`), another machine's devices (`ckptlab.topology`), a lesson's claims checked
  (`ckptlab.claims`), Lesson 8's preempted jobs (`ckptlab.graceful`), a container's entrypoint as
  pid 1 (`ckptlab.entrypoint`) and data pipelines (`ckptlab.pipeline`), Lesson 9's conversions
  (`ckptlab.hfconvert`) and their proof (`ckptlab.hfcheck`), and every lesson's work folder, removed
  when its kernel ends (`ckptlab.workdir`): never the grader's;
- the tool (``python -m ckptlab``, `ckptlab.__main__`): the folder `ckptlab.tool` (its own map in
  its ``__init__``), importing no lesson's module; never the grader's.
"""

from ckptlab.devices import NUM_DEVICES, DeviceSetupError, setup_devices

WINGS = {
    "shared": ("devices", "layout", "models", "plotting", "steps", "stheader", "adapters", "adapters.errors",
               "adapters.jax_internals", "adapters.orbax_internals"),
    "measuring": ("memory", "readcount", "memcount", "restorecount", "loadcount", "twohost", "s3server"),
    "problem models": ("training", "preempt", "unstacking", "tiers", "llama", "hf", "frontier", "frontier.formulas",
                       "frontier.simulation", "frontier.published"),
    "lessons": ("explore", "serving", "topology", "claims", "graceful", "entrypoint", "pipeline", "hfcheck",
                "hfconvert", "workdir"),
    "tool": ("tool", "tool.cli", "tool.inspection", "tool.planning", "tool.measuring", "tool.diffing",
             "tool.figures", "tool.files", "tool.objectstore", "tool.untrusted"),
}

__all__ = ["NUM_DEVICES", "WINGS", "DeviceSetupError", "setup_devices"]
