"""Checkpoints in tiers (``ckptlab.tiers``, problem 8.2's folders), written and restored by Orbax's own
emergency ``CheckpointManager`` in real jobs of processes joined by ``jax.distributed``: what Orbax
restores from each hidden case's folder (the expected value) is what the reference answers, what the
hidden tests' arithmetic of the folders (their diagnoses') says, and what the public examples state; each
harm does what it is named for, beside an undamaged control; and Orbax's answer never reaches the
learner's worker."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from autograder import registry
from autograder.engine.cases import case_seed
from autograder.hidden.unit8 import _held_model, _rule, _tier_cases, newest_across_tiers_truth
from autograder.wall import codec, files, kinds
from ckptlab.steps import COMMIT_FILE, TMP_MARK
from ckptlab.tiers import TierSpec, damage, held, make_tiers
from solutions.unit8 import newest_step_across_tiers


@pytest.mark.slow
def test_orbax_restores_what_the_reference_and_the_arithmetic_say_for_every_case(tmp_path):
    p = registry.get("8.2")
    draws = [_tier_cases(np.random.default_rng(case_seed(learner, p.id))) for learner in ("ada", "grace")]
    cases = [c for draw in draws for c in draw]
    public = [ex for ex in p.examples]
    realized = files.realize([c.args for c in cases] + [ex.args for ex in public], str(tmp_path))
    truths = {}
    for case, args in zip(cases + public, realized):
        arg = case.args[0]
        truth = newest_across_tiers_truth(*args)
        local, persistent = _held_model(arg)
        listing = held(args[0], arg.tier_spec())
        assert listing == {**{f"local/{q}": sorted(v) for q, v in local.items()}, "persistent": sorted(persistent)}, (
            arg, listing)
        assert truth == newest_step_across_tiers(*args) == _rule(local, persistent, args[1]), (arg, truth)
        if hasattr(case, "expected"):  # a public example: what its statement shows is what Orbax does
            assert truth == tuple(case.expected), (case.note, truth)
        else:
            truths.setdefault(case.category, set()).add(truth)
    # the cases cover each of Orbax's answers: nothing, the persistent tier, and two different local slices
    assert truths["nothing"] == {None} and all(t[1] == 0 for t in truths["slices_lost"] | truths["pair_process_lost"])
    assert {t[1] for cat in ("whole", "holes", "process_lost", "tie_other_slice") for t in truths[cat]} >= {1, 2}
    assert all(t[1] == 1 for t in truths["cut_tie"])  # a tie with the persistent tier, read locally
    # a slice still holds a complete step, older than the persistent tier's: the persistent one wins
    assert truths["persistent_newer"] == {(10, 0)}


def _fake_tiers(root, spec: TierSpec, local=(8, 10, 12), persistent=(5, 10)):
    """A folder laid out as Orbax's emergency manager lays it out (names and commit files only)."""
    for p in range(spec.processes):
        for step in local if spec.slice_of(p) else ():
            os.makedirs(os.path.join(root, "local", str(p), str(step), "state"))
            open(os.path.join(root, "local", str(p), str(step), COMMIT_FILE), "w").close()
        os.makedirs(os.path.join(root, "local", str(p)), exist_ok=True)
    for step in persistent:
        os.makedirs(os.path.join(root, "persistent", str(step), "default"))
        open(os.path.join(root, "persistent", str(step), COMMIT_FILE), "w").close()


def test_each_harm_does_what_it_is_named_for(tmp_path):
    spec = TierSpec(slices=3)
    for name in ("whole", "hurt"):
        _fake_tiers(tmp_path / name, spec)
    damage(tmp_path / "hurt", (("lost", 1), ("cut", 2), ("hole", 2, 1), ("persistent_cut",)))
    whole, hurt = held(tmp_path / "whole", spec), held(tmp_path / "hurt", spec)
    assert whole == {"local/0": [], "local/1": [8, 10, 12], "local/2": [8, 10, 12], "persistent": [5, 10]}  # the control
    # in order: process 2's 12 cut (its folder renamed, still there), then the one before the newest of what is left (8)
    assert hurt == {"local/0": [], "local/1": [], "local/2": [10], "persistent": [5]}
    assert any(n.startswith(f"12{TMP_MARK}") for n in os.listdir(tmp_path / "hurt" / "local" / "2"))
    assert any(n.startswith(f"10{TMP_MARK}") for n in os.listdir(tmp_path / "hurt" / "persistent"))
    assert os.listdir(tmp_path / "hurt" / "local" / "1") == []


def test_a_corrupt_step_never_goes_to_the_grader(tmp_path):
    with pytest.raises(ValueError, match="never hold one"):
        make_tiers([(str(tmp_path / "x"), TierSpec(), (("corrupt", 1, 0),))])


def test_orbax_s_answer_travels_beside_the_folder_never_to_the_worker(tmp_path):
    (tmp_path / "src" / "ckpt-x").mkdir(parents=True)
    path = files.TieredPath(str(tmp_path / "src" / "ckpt-x"), (12, 1))
    assert path.restored == (12, 1) and newest_across_tiers_truth(path, [[0], [1], [2]]) == (12, 1)
    import copy
    import pickle

    assert copy.deepcopy(path).restored == (12, 1) == pickle.loads(pickle.dumps(path)).restored
    sent = codec.dumps((path, [[0], [1], [2]]))
    assert "12, 1" not in sent and "[12" not in sent and json.loads(sent) is not None
    moved = files.mirror((path,), str(tmp_path / "src"), str(tmp_path / "dst"))
    assert type(moved[0]) is str and not hasattr(moved[0], "restored")
    with pytest.raises(RuntimeError, match="without Orbax's restore"):
        newest_across_tiers_truth(str(tmp_path / "src" / "ckpt-x"), [[0]])


def test_the_folder_is_described_in_the_learners_terms():
    from autograder.wall.words import in_words

    arg = kinds.TieredRootArg(registry.get("8.2").examples[2].args[0].spec, (("hole", 1, 0), ("hole", 2, 1)))
    words = in_words(arg)
    assert "3 processes in 3 replica slices" in words and "process 1's newest local step gone" in words, words


def test_a_tier_job_that_fails_is_the_graders_failure_never_the_learners(root, monkeypatch, tmp_path):
    """Every process of the references' tier jobs dies as it starts (killed by a ``sitecustomize`` on
    their import path, as the machine might kill them): 8.2 is the grader's failure, never a zero said
    to be the learner's. The control: the same grading without it gives full marks (test_grader)."""
    from autograder.engine import grade as grading

    (tmp_path / "sitecustomize.py").write_text(
        "import os\nif 'CKPT_TIERS_PARENT' in os.environ:  # a tier job's process alone\n    os._exit(9)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH")))))
    report = grading.grade([root / "solutions" / "unit8.py"], "ada", problems=["8.2"])
    (result,) = report.problems
    assert (result.status, result.score) == ("error", 0) and "grader itself failed" in result.message, result.message


@pytest.mark.slow
def test_a_folder_written_once_is_handed_out_as_copies(tmp_path):
    """The same folder asked for again (a check run twice, another learner's public examples) is copied
    from the one Orbax's job wrote: what one use does to its copy never reaches the next."""
    example = registry.get("8.2").examples[1]
    first = files.realize([example.args], str(tmp_path / "a"))[0][0]
    shutil.rmtree(os.path.join(first, "local", "1"))  # a careless answer, run in a learner's kernel
    second = files.realize([example.args], str(tmp_path / "b"))[0][0]
    assert held(second, example.args[0].tier_spec())["local/1"] == [8, 10, 12] and second.restored == first.restored
    assert second.restored == tuple(example.expected)
