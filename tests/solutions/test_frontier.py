"""Lesson 10's frontier run (ckptlab.frontier): the SimPy simulation held to the closed forms it is
taught beside, to its own bookkeeping, and to the published figures it replays; each check beside
a control that could have come out the other way."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ckptlab.frontier import formulas as F, published as L
from ckptlab.frontier.simulation import Cause, Cluster, Plan, Segment, Trace, draw_trace, simulate

SMALL = Cluster(gpus=1024, causes=(Cause("gpu", 2e-5, True), Cause("software", 1e-5, False)), state_bytes=1e12,
                storage_bandwidth=2e11, restart=300.0, peer_bandwidth=1e10, local_copy=0.5, planned_per_day=0.5)


def _mean_goodput(cluster, plan, days, seeds):
    g = np.array([simulate(cluster, plan, days, seed=s).goodput for s in range(seeds)])
    return g.mean(), 2.576 * g.std(ddof=1) / math.sqrt(seeds)  # (a 99% interval)


@pytest.mark.parametrize("plan", [Plan(900.0), Plan(900.0, asynchronous=False), Plan(3600.0, local_interval=300.0),
                                  Plan(3600.0, local_interval=300.0, replicas=2), Plan(20.0)])
def test_every_second_of_the_run_is_kept_training_lost_saving_or_restarting(plan):
    for seed in range(5):
        out = simulate(SMALL, plan, 10, seed=seed)
        assert out.interruptions > 0 and out.planned >= 0
        assert out.progress + out.lost + out.blocked + out.restarting == pytest.approx(out.wall, rel=1e-9)
        assert 0 < out.goodput < 1


def test_one_seed_one_outcome_and_another_seed_another():
    a, b, c = (simulate(SMALL, Plan(900.0, local_interval=120.0, replicas=2), 10, seed=s) for s in (7, 7, 8))
    assert (a.progress, a.interruptions, a.restores) == (b.progress, b.interruptions, b.restores)
    assert (a.progress, a.interruptions) != (c.progress, c.interruptions)


def test_synchronous_saves_reproduce_dalys_exact_goodput_within_the_monte_carlo_interval():
    """Daly's expected time per segment is this simulation's model exactly (synchronous saves, a
    restart that a failure starts again): the mean over seeds lands within its 99% interval. The
    control: the same runs against the formula with the restart left out, which lies outside it."""
    cluster = Cluster(gpus=4096, causes=(Cause("any", 1e-5, True),), state_bytes=2e12, storage_bandwidth=1e11,
                      restart=400.0)
    plan = Plan(F.young_interval(cluster.local_copy + cluster.write_seconds, cluster.mtbf), asynchronous=False)
    mean, half = _mean_goodput(cluster, plan, 30, 60)
    save, restart = plan.persistent_blocking(cluster), cluster.restart + cluster.write_seconds
    assert abs(mean - F.goodput(plan.persistent_interval, save, restart, cluster.mtbf)) <= half
    assert abs(mean - F.goodput(plan.persistent_interval, save, 0.0, cluster.mtbf)) > 5 * half


def test_interruptions_follow_the_summed_rates_and_the_table_trace_replays_its_counts():
    rng = np.random.default_rng(0)
    counts = [draw_trace(L.cluster(), L.DAYS, rng) for _ in range(200)]
    unplanned = np.array([t.unplanned for t in counts])
    planned = np.array([t.planned for t in counts])
    assert abs(unplanned.mean() - L.UNEXPECTED) < 3 * math.sqrt(L.UNEXPECTED / 200)
    assert abs(planned.mean() - L.PLANNED) < 3 * math.sqrt(L.PLANNED / 200)
    table = L.table_trace(np.random.default_rng(1))
    assert (table.unplanned, table.planned) == (L.UNEXPECTED, L.PLANNED)
    assert sum(count for _, _, count, _ in L.TABLE_5) == L.UNEXPECTED
    assert L.cluster().mtbf / F.HOUR == pytest.approx(L.DAYS * 24 / L.UNEXPECTED)
    assert np.all(np.diff(table.times) >= 0)


def test_a_segment_commits_an_asynchronous_write_only_once_it_has_landed():
    """Persistent saves every 100 s of training, 1 s blocking, a 50 s write: the save at 100
    blocks from 100 to 101 and commits at 151; a write longer than the interval holds the next save
    back. The control: a synchronous save of the same write commits as its blocking ends."""
    cluster = Cluster(gpus=8, causes=(Cause("x", 1e-9),), state_bytes=50.0, storage_bandwidth=1.0, local_copy=1.0)
    seg = Segment(cluster, Plan(100.0), start=0.0, progress=0.0)
    assert seg.at(100.5) == {"progress": 100.0, "blocked": 0.5, "local": None, "persistent": None}
    assert seg.at(150.0)["persistent"] is None and seg.at(151.0)["persistent"] == 100.0
    assert seg.at(160.0)["progress"] == pytest.approx(159.0)
    slow = Segment(Cluster(**{**cluster.__dict__, "state_bytes": 150.0}), Plan(100.0), 0.0, 0.0)
    # save 2, reached at 201, waits for save 1's write (it lands at 251), then blocks until 252
    assert slow.at(250.5) == {"progress": 200.0, "blocked": 1.0 + 49.5, "local": None, "persistent": None}
    assert slow.at(251.5)["persistent"] == 100.0 and slow.at(252.5)["progress"] == pytest.approx(200.5)
    sync = Segment(cluster, Plan(100.0, asynchronous=False), 0.0, 0.0)
    assert sync.at(151.0)["persistent"] == 100.0 and sync.at(150.9)["persistent"] is None


def test_replicas_turn_host_losses_into_peer_restores_and_a_lone_local_tier_into_persistent_ones():
    only_hosts = Cluster(**{**SMALL.__dict__, "causes": (Cause("gpu", 3e-5, True),), "planned_per_day": 0.0})
    alone = simulate(only_hosts, Plan(3600.0, local_interval=300.0, replicas=1), 10, seed=3)
    paired = simulate(only_hosts, Plan(3600.0, local_interval=300.0, replicas=2), 10, seed=3)
    assert alone.restores["local"] == alone.restores["peer"] == 0 and alone.restores["persistent"] > 0
    assert paired.restores["peer"] > 0 and paired.restores["persistent"] <= 1
    assert paired.goodput > alone.goodput
    racks = Cluster(**{**only_hosts.__dict__, "causes": (Cause("rack", 3e-5, True, peers_lost=True),)})
    gone = simulate(racks, Plan(3600.0, local_interval=300.0, replicas=4), 10, seed=3)
    assert gone.restores["local"] == gone.restores["peer"] == 0 and gone.restores["persistent"] > 0
    software = Cluster(**{**only_hosts.__dict__, "causes": (Cause("software", 3e-5, False),)})
    kept = simulate(software, Plan(3600.0, local_interval=300.0, replicas=1), 10, seed=3)
    assert kept.restores["local"] > 0 and kept.restores["peer"] == 0


def test_the_closed_forms_agree_with_each_other_where_they_should():
    mtbf, save, restart = 3 * F.HOUR, 30.0, 600.0
    young, daly = F.young_interval(save, mtbf), F.daly_interval(save, mtbf)
    assert daly == pytest.approx(young, rel=0.05) and daly != young
    tau, best = F.best_goodput(save, restart, mtbf)
    assert best >= F.goodput(young, save, restart, mtbf) >= F.goodput(10 * young, save, restart, mtbf)
    assert abs(F.goodput_first_order(young, save, restart, mtbf) - F.goodput(young, save, restart, mtbf)) < 0.01
    assert F.job_mtbf(1e6, 1000) == 1e3 and F.job_mtbf_from_rates({"a": 1.0, "b": 1.0}, 2) == F.HOUR / 4
    assert F.TRAINING_STATE_BYTES_PER_PARAM == 16 and F.CHECKPOINT_BYTES_PER_PARAM == 12
    bandwidth = F.bandwidth_for_goodput(6e12, restart, mtbf, 0.9)
    assert F.best_goodput(6e12 / bandwidth, restart, mtbf)[1] == pytest.approx(0.9, abs=1e-6)
    assert F.bandwidth_for_goodput(6e12, 0.2 * mtbf, mtbf, 0.9) == math.inf  # (restarts alone cost 18%)


def test_a_trace_given_is_replayed_as_given():
    trace = Trace(np.array([1000.0, 5000.0]), np.array([0, -1]))
    out = simulate(SMALL, Plan(600.0), 1, trace=trace)
    assert (out.interruptions, out.planned) == (1, 1)
    assert out.restores["persistent"] == 1 and out.lost == pytest.approx(1000.0 - 600.0 - SMALL.local_copy, abs=1e-6)
