"""Checkpoints in tiers (``ckptlab.tiers``, problem 8.2's folders): what the hidden tests' arithmetic
model of a damaged folder says is what Orbax says of the folder itself (the expected value), and what
the reference answers, for every kind of case and several learners; and each damage really does what it is named for, beside an undamaged control."""

from __future__ import annotations

import os

import numpy as np
import pytest

from autograder.hidden.unit8 import _tier_cases, newest_across_tiers_truth, tier_truth_model
from autograder.wall import files
from ckptlab.tiers import TMP_MARK, TierSpec, newest_restorable, restorable_steps, write_tiers
from solutions.unit8 import newest_step_across_tiers

pytestmark = pytest.mark.slow


def test_the_arithmetic_model_of_each_case_is_what_orbax_restores(tmp_path):
    cases = [c for seed in range(3) for c in _tier_cases(np.random.default_rng(seed))]
    realized = files.realize([c.args for c in cases], str(tmp_path))
    answers = {}
    for case, args in zip(cases, realized):
        truth = newest_across_tiers_truth(args[0])
        assert truth == tier_truth_model(case.args[0]) == newest_step_across_tiers(args[0]), (case.category, case.args)
        answers.setdefault(case.category, set()).add(truth)
    assert answers["nothing"] == {None} and all(t[1] == "persistent" for t in answers["host_lost"])
    assert any(t[1] == "local" for t in answers["whole"] | answers["tie"])


def test_each_damage_does_what_it_is_named_for(tmp_path):
    spec = dict(hosts=2, steps=6, local_every=1, local_keep=3, persistent_every=3, persistent_keep=2)
    write_tiers(tmp_path / "whole", TierSpec(**spec))  # the control
    write_tiers(tmp_path / "hurt", TierSpec(**spec, damage=(("lost", 1), ("cut", 0), ("unreadable", 0, 1),
                                                            ("persistent_cut",))))
    whole, hurt = tmp_path / "whole", tmp_path / "hurt"
    assert restorable_steps(str(whole / "local" / "0")) == {4, 5, 6} == restorable_steps(str(whole / "local" / "1"))
    assert os.listdir(hurt / "local" / "1") == []
    assert f"6{TMP_MARK}" in os.listdir(hurt / "local" / "0")
    # in order: 6 cut, then the one before the newest of what is left (4) unreadable, still looking committed
    assert restorable_steps(str(hurt / "local" / "0")) == {5} and "4" in os.listdir(hurt / "local" / "0")
    assert restorable_steps(str(hurt / "persistent")) == {3}
    assert newest_restorable(whole) == (6, "local") and newest_restorable(hurt) == (3, "persistent")
