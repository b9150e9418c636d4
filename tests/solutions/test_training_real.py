"""Unit 5 held against the real libraries: training states saved by Orbax, savers really killed,
and a training process killed and resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec as P
from orbax.checkpoint import options as ocp_options

from autograder import registry
from autograder.engine.cases import hidden_cases
from autograder.hidden.unit5 import restorable_step
from autograder.wall import files
from ckptlab import preempt
from ckptlab.layout import course_mesh
from solutions import unit5
from tests.solutions.test_layouts_real import _orbax_bytes_per_device as orbax_bytes_per_device


def _cases(pid, learners=("ana", "ben")):
    p = registry.get(pid)
    out = [ex.args for ex in p.examples]
    for learner in learners:
        out += [c.args for c in hidden_cases(p, learner)[1]]
    return out


class _Params(nnx.Module):
    def __init__(self, params):
        for name, (shape, dtype) in params.items():
            setattr(self, name, nnx.Param(jnp.ones(shape, jnp.dtype(dtype))))


def test_training_state_bytes_match_a_real_save_of_an_nnx_optimizer(tmp_path):
    """The whole state of a real nnx.Optimizer(adamw(mu_dtype=...)), wrapped in optax.MultiSteps
    where a case accumulates, sharded as each case says and saved uncompressed: its chunk files hold
    the reference's total, and Orbax's own replica slices give the reference's bytes per host. Each
    case's optimizer is the one its arguments name (the dtypes checked leaf by leaf)."""
    cases = _cases("5.1", learners=("ana",))
    assert {(c[4], c[5] > 1) for c in cases} >= {(None, False), ("float32", False), ("bfloat16", False), (None, True)}
    for i, (params, specs, mesh_shape, per_host, mu_dtype, accumulate) in enumerate(cases):
        model = _Params(params)
        tx = optax.adamw(1e-3, mu_dtype=mu_dtype)
        if accumulate > 1:
            tx = optax.MultiSteps(tx, every_k_schedule=accumulate)
        optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
        state = {"model": nnx.state(model), "optimizer": nnx.state(optimizer)}
        mesh = course_mesh(mesh_shape)

        def place(path, leaf, params=params, specs=specs, mesh=mesh):
            names = [getattr(k, "key", None) for k in path]
            name = next((n for n in reversed(names) if n in params), None)
            spec = P(*specs[name]) if name is not None and leaf.ndim else P()
            return jax.device_put(leaf, NamedSharding(mesh, spec))

        sharded = jax.tree_util.tree_map_with_path(place, state)
        leaves = jax.tree.leaves(sharded)
        per_param = 3 + (accumulate > 1)  # the parameter, mu, nu (and the accumulated gradients)
        assert len(leaves) == per_param * len(params) + 2 + 2 * (accumulate > 1)  # count, step (mini_step, gradient_step)
        paths = {jax.tree_util.keystr(p): leaf.dtype for p, leaf in jax.tree_util.tree_leaves_with_path(sharded)}
        for name, (_, dtype) in params.items():
            mu = [d for k, d in paths.items() if f"['mu']['{name}']" in k]
            assert mu and all(d == jnp.dtype(mu_dtype or dtype) for d in mu), (name, mu_dtype, mu)
        with ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_compression=False)) as ckpt:
            ckpt.save(tmp_path / f"s{i}", args=ocp.args.PyTreeSave(sharded))
        chunk_bytes = sum(f.stat().st_size for f in (tmp_path / f"s{i}").rglob("*")
                          if f.is_file() and all(part.isdigit() for part in f.name.split(".")))
        want = unit5.training_state_bytes(params, specs, mesh_shape, per_host, mu_dtype, accumulate)
        assert chunk_bytes == sum(want.values()), (params, specs, mesh_shape)
        hosts = {h: 0 for h in want}
        for leaf in leaves:
            for device, n in orbax_bytes_per_device(leaf, True).items():
                hosts[device // per_host] += n
        assert hosts == want, (params, specs, mesh_shape, per_host)


@pytest.mark.slow
def test_preempted_roots_are_what_their_case_says_and_the_reference_agrees_with_orbax(tmp_path):
    """Each hidden root comes from a real kill at the point its category names, and the reference's
    step is what Orbax itself (its finalized check told the protocol, then a real restore) says."""
    cases = [c for learner in ("ana", "ben") for c in hidden_cases(registry.get("5.2"), learner)[1]]
    roots = files.realize([c.args for c in cases], str(tmp_path))
    seen = defaultdict(int)
    for case, (root,) in zip(cases, roots):
        names = os.listdir(root)
        committed = preempt.committed_steps(root)
        uncommitted = [n for n in names if n.isdigit() and int(n) not in committed]
        if case.category == "rename_mid_save":
            assert any(preempt.TMP_MARK in n for n in names) and not uncommitted, names
        elif case.category in ("in_place_mid_save", "in_place_written"):
            assert uncommitted and max(map(int, uncommitted)) > max(committed), names
        elif case.category == "first_save":
            assert committed == [] and names, names
        truth = restorable_step(root)
        assert unit5.latest_restorable_step(root) == truth, (case.category, names)
        if case.category in ("state_missing", "state_unreadable", "none_restorable") or (
                case.category == "public" and case.args[0].damage):
            # committed steps the grader damaged after the kill: the newest does not restore
            assert committed and (truth is None or truth < max(committed)), (case.category, names, truth)
        else:
            assert truth == (max(committed) if committed else None), (case.category, names)
        seen[case.category] += 1
    assert set(seen) == {c.category for c in cases}


def test_orbax_default_check_trusts_a_save_cut_short_in_place(tmp_path):
    """What Lesson 5 and problem 5.2's hint teach: a step folder written in place and never committed
    passes Orbax's default finalized check, and a default manager's latest_step(), but not the check
    told the protocol, and it does not restore."""
    (report,) = preempt.kill_savers([preempt.SaverSpec(str(tmp_path / "r"), kill="written", commit_file=True,
                                                       min_committed=1)])
    assert report["outcome"] == "killed"
    half = tmp_path / "r" / str(max(int(n) for n in report["entries"]))
    assert not (half / preempt.COMMIT_FILE).exists()
    commit_file = ocp_options.AtomicityOptions(mode=ocp_options.AtomicityMode.COMMIT_FILE)
    assert ocp.step.is_checkpoint_finalized(half)
    assert not ocp.step.is_checkpoint_finalized(half, atomicity_options=commit_file)
    assert ocp.CheckpointManager(tmp_path / "r").latest_step() == int(half.name)
    with pytest.raises(Exception):  # noqa: B017 - whichever error: it must not restore
        ocp.StandardCheckpointer().restore(half / "state")


def test_the_courses_run_saves_the_pipelines_position_and_resumes_from_it(tmp_path):
    """Lesson 5's loop (training.run) is what problem 5.3 asks for: each step's data item is the
    pipeline's position (batches.get_state() after that many steps), and a run started again restores
    it and the state and ends, bit for bit, as a run never interrupted; one that restored the state
    but not the position (the mistake 5.3's second example tells) ends elsewhere."""
    import json

    from ckptlab import training

    root = tmp_path / "run"
    _, _, ran = training.run(str(root), 2, seed=3)
    batches = training.Batches(3)
    next(batches), next(batches)
    assert json.loads((root / "2" / "data" / "metadata").read_text()) == batches.get_state()
    model, optimizer, ran_again = training.run(str(root), 4, seed=3)
    assert (ran, ran_again) == ([0, 1], [2, 3])
    got, want = training.params_of(model), training.uninterrupted_params(4, 3)
    assert sorted(got) == sorted(want) and all(np.array_equal(got[k], want[k]) for k in want)
    lost = training.resumed_without_position(4, 3, 2)
    assert not all(np.array_equal(got[k], lost[k]) for k in got)
    with pytest.raises(TypeError, match="pipeline's position"):  # the lesson's old call, save_args(state, step)
        training.save_args(training.train_state(model, optimizer), 2)


def _train(root, out, kill_after=None, steps=8):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    proc = subprocess.Popen([sys.executable, "-m", "ckptlab.training", str(root), "--steps", str(steps),
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.strip() == kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    return lines


@pytest.mark.slow
def test_a_training_run_killed_mid_save_resumes_to_the_same_bits(tmp_path):
    straight = _train(tmp_path / "a", tmp_path / "a.npz")
    assert straight[-1] == "done"
    killed = _train(tmp_path / "b", tmp_path / "unused.npz", kill_after="save 4")
    assert killed[-1] == "save 4" and not (tmp_path / "unused.npz").exists()
    resumed = _train(tmp_path / "b", tmp_path / "b.npz")
    start = int(resumed[0].split()[1])
    assert 1 <= start <= 4 and resumed[-1] == "done"
    a, b = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    # and a resume that trained on from the wrong data position would not match:
    c = _train(tmp_path / "c", tmp_path / "c.npz", steps=3)
    assert c[-1] == "done"
    assert not all(np.array_equal(a[k], np.load(tmp_path / "c.npz")[k]) for k in a)
