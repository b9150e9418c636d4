"""What problem 10.2 returns, a checkpoint plan for a frontier run, and how it is judged: by the
simulation, not against a reference's plan (many plans are right).

A plan keeps its rules (the write budget, 1 to 4 copies, positive finite intervals), then
:func:`ckptlab.frontier.simulation.simulate` runs it on failure traces drawn with seeds that
:func:`judging` derives from the case's own arguments (the same in the learner's kernel, for a public
example, and in the grader's judge), and its mean goodput must reach the target. The judge's
expected value is that judging data (:func:`judging`), computed by the hidden tests from the case.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from autograder.wall.returns import ReturnSpec, is_int, type_name

KEYS = ("persistent_interval", "local_interval", "replicas")
MAX_REPLICAS = 4
RUNS, DAYS = 5, 25.0  # simulated runs per case, each of DAYS days
BUDGET_SLACK = 1e-9  # (state_bytes / (state_bytes / budget) may round a hair above the budget)


def judging(cluster: dict, target_goodput: float, write_budget: float, secret: str = "") -> dict:
    """What judging a plan for this case needs, as plain data: the case itself, and the seeds of its
    runs, derived from the case (another cluster, other traces) and, for a hidden case, ``secret``
    (the course's salt: the traces are then as hidden as the case's own parameters)."""
    text = json.dumps([cluster, float(target_goodput), float(write_budget), secret], sort_keys=True)
    base = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    return {"cluster": cluster, "target": float(target_goodput), "budget": float(write_budget),
            "seeds": [base + i for i in range(RUNS)], "days": DAYS}


def _number(v) -> bool:
    """A number a float holds (an int too large for one is refused here, not in the grader's arithmetic)."""
    if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, (bool, np.bool_)):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


def broken_rule(plan: dict, data: dict) -> str | None:
    """The rule ``plan`` breaks before any simulation, as a message, or None."""
    persistent, local, replicas = (plan[k] for k in KEYS)
    intervals = [persistent] + ([] if local is None else [local])
    if not all(math.isfinite(float(x)) and float(x) > 0 for x in intervals):
        return "its intervals must be positive, finite numbers of seconds (local_interval None: no local tier)"
    if not 1 <= int(replicas) <= MAX_REPLICAS:
        return f"replicas must be 1 to {MAX_REPLICAS}"
    cluster = data["cluster"]
    rate = cluster["state_bytes"] / float(persistent)
    if rate > data["budget"] * (1 + BUDGET_SLACK):
        return (f"it writes {rate / 1e9:,.3f} GB/s to storage on average (the state every persistent interval), over "
                f"the write budget of {data['budget'] / 1e9:,.3f} GB/s")
    return None


def _plan_and_cluster(plan: dict, data: dict):
    from ckptlab.frontier.simulation import Cluster, Plan

    local = plan["local_interval"]
    return (Plan(float(plan["persistent_interval"]), None if local is None else float(local), int(plan["replicas"])),
            Cluster.from_dict(data["cluster"]))


def _ceiling(plan, cluster, traces, days: float) -> float:
    """An upper bound on the plan's mean goodput (to skip simulating a hopeless plan, whose saves come
    so often that a run would take seconds to simulate): the time saves stop training, and at least
    the restart after every interruption (or until the next), are never training."""
    from ckptlab.frontier.formulas import DAY

    horizon = days * DAY
    saving = cluster.local_copy / plan.persistent_interval
    if plan.local_interval is not None:
        saving += plan.local_blocking(cluster) / plan.local_interval
    idle = 0.0
    for trace in traces:
        ends = list(trace.times[1:]) + [horizon]
        idle += sum(min(cluster.restart, end - t) for t, end in zip(trace.times.tolist(), ends))
    return (1 - idle / (horizon * len(traces))) / (1 + saving)


def mean_goodput(plan: dict, data: dict) -> float:
    """The plan's mean goodput over the case's simulated runs (a bound below the target where the plan
    cannot reach it by far)."""
    from ckptlab.frontier.simulation import draw_trace, simulate

    plan, cluster = _plan_and_cluster(plan, data)
    traces = [draw_trace(cluster, data["days"], np.random.default_rng(seed)) for seed in data["seeds"]]
    ceiling = _ceiling(plan, cluster, traces, data["days"])
    if ceiling < data["target"] - 0.01:
        return ceiling
    return float(np.mean([simulate(cluster, plan, data["days"], trace=trace).goodput for trace in traces]))


@dataclass(frozen=True)
class TierPlan(ReturnSpec):
    """A plan ``{"persistent_interval": seconds, "local_interval": seconds or None, "replicas": int}``,
    right when it keeps the rules and its mean simulated goodput reaches the case's target."""

    checks_examples = True

    @property
    def describe(self) -> str:
        return ("a dict {'persistent_interval': float, 'local_interval': float or None, 'replicas': int} "
                "(intervals in seconds of training)")

    def type_error(self, v, detail: bool = True) -> str | None:
        if type(v) is not dict:
            return f"must return {self.describe}, but returned a {type_name(v, detail)}"
        if set(v) != set(KEYS):
            return f"must return {self.describe}" + (f", but its keys are {sorted(map(str, v))}" if detail else
                                                       ": it has other keys")
        for key in ("persistent_interval", "local_interval"):
            if not (_number(v[key]) or (key == "local_interval" and v[key] is None)):
                what = "an int too large for a float" if is_int(v[key]) else f"a {type_name(v[key], detail)}"
                return f"must return {self.describe}, but {key!r} is {what}"
        if isinstance(v["replicas"], bool) or not is_int(v["replicas"]):
            return f"must return {self.describe}, but 'replicas' is a {type_name(v['replicas'], detail)}"
        return None

    def has_nan(self, v) -> bool:
        return any(v[k] is not None and math.isnan(float(v[k])) for k in ("persistent_interval", "local_interval"))

    def equal(self, actual, expected) -> bool:
        return broken_rule(actual, expected) is None and mean_goodput(actual, expected) >= expected["target"]

    def check_example(self, args, real_args, got) -> str | None:
        bad = self.type_error(got)
        if bad:
            return f"tier_plan {bad}"
        if self.has_nan(got):
            return "an interval is NaN"
        data = judging(*args)
        broken = broken_rule(got, data)
        if broken:
            return f"the plan breaks a rule: {broken}"
        mean = mean_goodput(got, data)
        if mean < data["target"]:
            return (f"its mean goodput over {RUNS} simulated runs of {DAYS:g} days is {mean:.4f}, short of the target "
                    f"{data['target']:.4f} (the runs: simulate(cluster, plan, {DAYS:g}, seed) for seed {data['seeds'][0]} to "
                    f"{data['seeds'][-1]}, with Cluster.from_dict(cluster))")
        return None
