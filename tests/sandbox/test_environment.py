"""What a worker starts with, on the libraries installed here: XLA flags chosen from the installed
jaxlib's version (jaxlib ends a process whose XLA_FLAGS name a flag it does not know), and a
worker that dies before any learner code ran reported as the grader's failure, naming why, never
as the learner's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autograder import sandbox
from autograder.sandbox import environment
from tests.conftest import best_isolation


@pytest.mark.parametrize("version, wanted", [
    ("0.10.2", {"--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"}),
    ("0.11.0", {"--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"}),
    ("0.12.0", {"--xla_backend_optimization_level=0"}),
    ("0.12.0.1", {"--xla_backend_optimization_level=0"}),
    ("0.13.0.dev20270101", {"--xla_backend_optimization_level=0"}),
    ("", set()),  # no jaxlib, or a version that cannot be read: no flag at all
])
def test_flags_are_chosen_from_the_jaxlib_version(version, wanted):
    assert set(environment.xla_flags_for(version).split()) == wanted


def test_the_installed_jaxlib_starts_and_compiles_with_the_flags_chosen_for_it():
    """The flags a worker gets, given to the installed jaxlib: it starts its 16 devices and compiles
    (an unknown flag ends the process at its first device, with exit status 1). The control, one
    flag no jaxlib knows, must end it."""
    code = "import jax, jax.numpy as jnp; print(len(jax.devices()), int((jnp.arange(4) + 1).sum()))"

    def start(flags: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)

    ours = start(environment.worker_xla_flags())
    assert ours.returncode == 0 and ours.stdout.split() == ["16", "10"], (environment.jaxlib_version(), ours.stderr[-800:])
    control = start(environment.worker_xla_flags() + " --xla_no_jaxlib_knows_this_flag=1")
    assert control.returncode != 0 and "Unknown flag" in control.stderr, control.stderr[-800:]


@pytest.fixture
def unknown_flag(monkeypatch):
    """Workers started from now on get a flag no jaxlib knows (as a grader passing a flag the
    installed jaxlib dropped would)."""
    environment._xla_flags.cache_clear()
    monkeypatch.setattr(environment, "XLA_SPEED_FLAGS", (("--xla_no_jaxlib_knows_this_flag=1", (0,), None),))
    yield "--xla_no_jaxlib_knows_this_flag=1"
    environment._xla_flags.cache_clear()


@pytest.mark.parametrize("level", ["basic", "strict"])
def test_a_worker_whose_start_fails_is_the_graders_failure_naming_the_cause(unknown_flag, grade_code, level):
    if level == "strict" and best_isolation() != "strict":
        pytest.skip("this machine has no strict level")
    # 1.1 imports Flax (JAX at load); 3.1's code only through ckptlab, whose functions start JAX.
    # (A problem's code keeps the imports its function uses.)
    code = ("from flax import linen as nn\n"
            "def dense_checkpoint_accounting(seed, x, num_shards, features):\n    return nn.Dense\n"
            "from ckptlab.layout import real_index_domains\n"
            "def chunks_to_read(global_shape, chunk_shape, mesh_shape, spec):\n"
            "    return real_index_domains(global_shape, mesh_shape, spec)\n")
    report = grade_code(code, ["1.1", "3.1"], isolation=level)
    for result in report.problems:
        assert (result.status, result.category) == ("error", "grader"), result
        assert "before any of your code ran" in result.message and unknown_flag in result.message, result.message
        assert "your code exits" not in result.message and "out of memory" not in result.message


def test_learner_code_that_dies_as_a_failed_start_would_is_still_its_own(grade_code):
    """Hostile: code that prints what a failed start prints, then ends its process at load, or
    during a case, is the learner's (the worker said its start was over before loading it)."""
    die = ("import os, sys\n"
           "def die():\n"
           "    sys.stderr.write('F0000 x.cc:1] Unknown flag in XLA_FLAGS: --xla_x=1\\n'); sys.stderr.flush(); os._exit(1)\n")
    at_load = die + "DONE = die()\ndef dense_checkpoint_accounting(seed, x, num_shards, features):\n    return DONE\n"
    in_case = die + "def dense_checkpoint_accounting(seed, x, num_shards, features):\n    return die()\n"
    for code in (at_load, in_case):
        result = grade_code(code, ["1.1"], isolation=best_isolation()).problems[0]
        assert (result.status, result.category) == ("error", "crashed"), result
        assert "before any of your code ran" not in result.message


def test_a_start_failures_cause_is_the_last_telling_line_of_the_log():
    run = sandbox.RunResult("failed_start", returncode=1, stderr_tail=(
        "WARNING: something harmless\nF1127 12:07:29.922111    3913 parse_flags_from_env.cc:234] "
        "Unknown flag in XLA_FLAGS: --xla_gone=1\n"))
    assert sandbox.start_failure(run) == "exit code 1: Unknown flag in XLA_FLAGS: --xla_gone=1"
    assert sandbox.start_failure(sandbox.RunResult("failed_start", returncode=-9)) == "killed by signal 9"
