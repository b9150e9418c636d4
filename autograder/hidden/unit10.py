"""Hidden cases for Unit 10 (checkpointing a frontier run). Problems 10.1 and 10.3 are closed forms:
their expected values are computed here, by the same arithmetic as the references. Problem 10.2's
plans are judged by the simulation (``autograder.wall.plan_returns``): its expected value is what the
judge needs, the case and the seeds of its runs, and each case's target sits between the goodput a
right plan reaches (a local tier at Young's interval, a copy on a peer) and what the plans short of it
can (storage alone under the budget, one local copy when most failures take their host)."""

from __future__ import annotations

import math
import os

import numpy as np

from autograder.hidden import Case, Hidden
from autograder.wall.plan_returns import MAX_REPLICAS, broken_rule, judging

HOUR = 3600.0
# Causes of failure, by the names of Llama 3's Table 5, and whether each takes its host's local data.
HOST_LOST = ("Faulty GPU", "GPU HBM3 Memory", "Host Maintenance", "GPU SRAM Memory", "GPU System Processor", "NIC")
HOST_KEPT = ("Software Bug", "Network Switch/Cable", "NCCL Watchdog Timeouts", "Dependency")
INTERVAL_REL, GOODPUT_ABS = 0.02, 0.004  # 10.1's tolerances (its return spec's, said in its statement)


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _shares(rng, n: int, most: float = 0.6) -> np.ndarray:
    """``n`` shares of a whole, none over ``most`` (one cause alone is then far from the sum)."""
    while True:
        shares = rng.dirichlet(np.full(n, 4.0))
        if n == 1 or shares.max() <= most:
            return shares


def _rates(rng, gpus: int, mtbf: float, n: int, names=HOST_LOST + HOST_KEPT) -> dict:
    """``n`` causes, their rates per GPU-hour adding up to a job MTBF of ``mtbf`` seconds on ``gpus``."""
    chosen = [names[int(i)] for i in rng.permutation(len(names))[:n]]
    total = HOUR / mtbf / gpus
    return {name: float(total * s) for name, s in zip(chosen, _shares(rng, n))}


# ---------------------------------------------------------------------------------------------
# 10.1 checkpoint_interval

def _interval_case(rng, category: str) -> Case:
    """One case of ``category``; every one keeps the first-order goodput meaningful (the interval a few
    percent of the MTBF), the restart at least the asynchronous write (it reads the checkpoint back)."""
    gpus = int(_pick(rng, (256, 512, 1024) if category == "small_job" else (8192, 16384, 24576, 32768)))
    mtbf = float(rng.uniform(3.0, 6.0)) * HOUR
    if category == "small_job":
        mtbf = float(rng.uniform(40.0, 120.0)) * HOUR
    causes = {"one_cause": 1, "many_causes": int(rng.integers(6, 9))}.get(category, int(rng.integers(2, 6)))
    rates = _rates(rng, gpus, mtbf, causes)
    blocking = float(rng.uniform(1e-4, 4e-4)) * mtbf
    if category == "async_heavy":  # a write far longer than the copy (1% of the MTBF or more), the restart longer
        write = float(rng.uniform(0.010, 0.013)) * mtbf
        restart = write + float(rng.uniform(0.009, 0.012)) * mtbf
    elif category == "restart_heavy":
        write = float(rng.uniform(0.2, 1.0)) * blocking
        restart = float(rng.uniform(0.020, 0.026)) * mtbf
    else:  # a write of 1.5 to 4 times the copy
        write = float(rng.uniform(1.5, 4.0)) * blocking
        restart = float(rng.uniform(0.004, 0.015)) * mtbf
    return Case(category, (gpus, rates, round(blocking, 2), round(write, 2), round(max(restart, write), 1)))


def _interval_cases(rng):
    kinds = ("llama_scale", "llama_scale", "async_heavy", "async_heavy", "restart_heavy", "restart_heavy",
             "small_job", "small_job", "one_cause", "many_causes", "many_causes")
    return [_interval_case(rng, k) for k in kinds]


def interval_truth(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    """10.1's answer, by the reference's arithmetic."""
    rate = gpus * sum(failures_per_gpu_hour.values()) / HOUR
    mtbf = 1.0 / rate
    interval = math.sqrt(2.0 * blocking_seconds * mtbf)
    goodput = 1.0 - blocking_seconds / interval - (interval / 2.0 + async_seconds + restart_seconds) / mtbf
    return interval, goodput


def _first_order(mtbf, blocking, write, restart, interval=None):
    tau = math.sqrt(2.0 * blocking * mtbf) if interval is None else interval
    return tau, 1.0 - blocking / tau - (tau / 2.0 + write + restart) / mtbf


def _mistakes(args) -> dict:
    """What each classic mistake returns on these arguments, ``(interval, goodput)``."""
    gpus, rates, blocking, write, restart = args
    mtbf = HOUR / (gpus * sum(rates.values()))
    tau = math.sqrt(2.0 * blocking * mtbf)
    out = {
        "per_gpu_mtbf": _first_order(mtbf * gpus, blocking, write, restart),
        "hours_as_seconds": _first_order(mtbf / HOUR, blocking, write, restart),
        "largest_cause": _first_order(HOUR / (gpus * max(rates.values())), blocking, write, restart),
        "async_as_blocking": _first_order(mtbf, blocking + write, 0.0, restart),
        "no_restart": (tau, _first_order(mtbf, blocking, write, 0.0)[1]),
        "no_async": (tau, _first_order(mtbf, blocking, 0.0, restart)[1]),
        "goodput_elsewhere": (tau, _first_order(mtbf, blocking, write, restart, math.sqrt(2.0 * (blocking + write) * mtbf))[1]),
    }
    first = next(iter(rates.values()))
    if first != max(rates.values()):
        out["first_cause"] = _first_order(HOUR / (gpus * first), blocking, write, restart)
    return out


def _near(actual, wrong, expected) -> bool:
    """``actual`` is ``wrong`` within the problem's tolerances, and ``wrong`` is not right."""
    def close(pair, other):
        return (math.isclose(pair[0], other[0], rel_tol=INTERVAL_REL)
                and abs(pair[1] - other[1]) <= GOODPUT_ABS)
    return close(actual, wrong) and not close(wrong, expected)


def _diagnose_interval(args, actual, expected):
    interval, goodput = (float(x) for x in actual)
    if math.isclose(goodput, expected[0], rel_tol=INTERVAL_REL) and abs(interval - expected[1]) <= GOODPUT_ABS:
        return "swapped"
    if abs(goodput / 100 - expected[1]) <= GOODPUT_ABS and math.isclose(interval, expected[0], rel_tol=INTERVAL_REL):
        return "percent"
    mistakes = _mistakes(args)
    for name in ("per_gpu_mtbf", "hours_as_seconds", "largest_cause", "first_cause", "async_as_blocking"):
        wrong = mistakes.get(name)
        if wrong and math.isclose(interval, wrong[0], rel_tol=INTERVAL_REL) \
                and not math.isclose(wrong[0], expected[0], rel_tol=INTERVAL_REL):
            return name
    for name in ("no_restart", "no_async", "goodput_elsewhere"):
        if _near((interval, goodput), mistakes[name], expected):
            return name
    if math.isclose(interval, expected[0], rel_tol=INTERVAL_REL):
        return "goodput_only"
    return None


_INTERVAL_CATEGORY_MESSAGES = {
    "llama_scale": "Wrong on a job of thousands of GPUs, as Llama 3's was.",
    "async_heavy": "Wrong when a save's asynchronous write takes far longer than its blocking part.",
    "restart_heavy": "Wrong when restarts are slow (a few percent of the job's MTBF).",
    "small_job": "Wrong on a job of a few hundred GPUs (a job MTBF of days).",
    "one_cause": "Wrong with a single cause of failure.",
    "many_causes": "Wrong with many causes of failure: every one of them stops the job.",
}

INTERVAL = Hidden(
    generate=_interval_cases,
    messages={
        "swapped": "Return (interval, goodput), in that order.",
        "percent": "Return the goodput as a fraction of the wall-clock time (0.93), not a percentage.",
        "per_gpu_mtbf": "Your interval is about sqrt(gpus) times too long: it uses one GPU's MTBF. Any GPU's failure "
                        "stops the job, so the job fails gpus times as often: its MTBF is one GPU's divided by the "
                        "number of GPUs (their rates add).",
        "hours_as_seconds": "The rates are failures per GPU-hour: the job's MTBF they give is in hours, and it "
                            "meets blocking_seconds in a formula in seconds. Convert it (x 3600) first.",
        "largest_cause": "Your job MTBF comes from the most frequent cause alone: every cause stops the job, so their "
                     "rates add up (sum them, then multiply by the GPUs).",
        "first_cause": "Your job MTBF comes from one cause's rate: every cause stops the job, so their rates add up "
                       "(sum them over the dict, then multiply by the GPUs).",
        "async_as_blocking": "Your interval counts the whole save, its write included, as the time it stops "
                             "training: only blocking_seconds stops training (delta in Young's sqrt(2 delta M)); the "
                             "asynchronous write runs beside training and costs only when a failure comes.",
        "no_restart": "Your goodput leaves out the restart: every failure also costs restart_seconds of wall-clock "
                      "time, once per job MTBF on average.",
        "no_async": "Your goodput leaves out the asynchronous write: a checkpoint is restorable only once its "
                    "write has finished, so each failure also loses, on average, the write's time "
                    "(async_seconds) beyond half an interval.",
        "goodput_elsewhere": "Your interval is right, but your goodput is the one at another interval (the whole "
                             "save, write included, as delta): compute it at the interval you return.",
        "goodput_only": "Your interval is right, but your goodput is not the first-order one at it: count, per "
                        "second of wall-clock time, what saves take (delta every interval of training) and what each failure "
                        "takes (half an interval of work, the write not yet finished, the restart), once per job "
                        "MTBF.",
        **_INTERVAL_CATEGORY_MESSAGES,
    },
    diagnose=_diagnose_interval,
    precedence=("swapped", "percent"),
    requirements={
        "in failures per GPU-hour": ("llama_scale", "small_job", "many_causes"),
        "every GPU fails independently of the others, at these constant rates, and any failure stops the whole "
        "job": ("llama_scale", "small_job", "many_causes"),
        "the checkpoint can be restored only once that write has finished": ("async_heavy",),
        "the restart, reading the checkpoint included, takes `restart_seconds`": ("restart_heavy", "async_heavy"),
        "Young's interval": ("llama_scale", "async_heavy", "small_job"),
        "the expected share of wall-clock time whose training is kept": ("restart_heavy", "async_heavy", "llama_scale"),
    },
    on_exception="The arguments are plain numbers and a dict of rates; return a tuple of two floats.",
    expected=interval_truth,
)


# ---------------------------------------------------------------------------------------------
# 10.2 tier_plan: judged by the simulation (autograder.wall.plan_returns)

TARGET_MARGIN = 0.02  # the target: the best plan's first-order goodput, less this (a right plan's margin)


def _costs(cluster: dict) -> dict:
    """The cluster's costs a plan's first-order goodput needs, in seconds."""
    rates = [c["per_gpu_hour"] * cluster["gpus"] / HOUR for c in cluster["causes"]]
    hosts = max(1, cluster["gpus"] // cluster["gpus_per_host"])
    return {"mtbf": 1.0 / sum(rates), "lost": sum(r for r, c in zip(rates, cluster["causes"]) if c["host_lost"]) / sum(rates),
            "racks": sum(r for r, c in zip(rates, cluster["causes"]) if c.get("peers_lost")) / sum(rates),
            "write": cluster["state_bytes"] / min(cluster["storage_bandwidth"], hosts * cluster["host_bandwidth"]),
            "peer": cluster["state_bytes"] / hosts / cluster["peer_bandwidth"], "copy": cluster["local_copy"]}


def plan_goodput(cluster: dict, persistent: float, local: float | None, replicas: int) -> float:
    """A plan's first-order goodput (the simulation's model: async persistent writes, restores from a
    local copy, a peer's or storage, planned interruptions that save first and lose nothing)."""
    k = _costs(cluster)
    fallback = persistent / 2.0 + 2.0 * k["write"]  # the work since the last commit, the write's lag and its read
    saving = k["copy"] / persistent
    if local is None:
        per_failure = fallback
    else:
        saving += (k["copy"] + (replicas - 1) * k["peer"]) / local
        if replicas == 1:
            per_failure = k["lost"] * fallback + (1 - k["lost"]) * (local / 2.0 + k["copy"])
        else:  # (a rack's failure takes every copy: back to storage)
            per_failure = (k["racks"] * fallback + (k["lost"] - k["racks"]) * (local / 2.0 + k["peer"])
                           + (1 - k["lost"]) * (local / 2.0 + k["copy"]))
    planned = cluster["planned_per_day"] / 86400.0 * (cluster["restart"] + 2.0 * k["write"])
    return 1.0 - saving - (per_failure + cluster["restart"]) / k["mtbf"] - planned


def young_local(cluster: dict, replicas: int) -> float:
    """Young's interval for local saves of ``replicas`` copies."""
    k = _costs(cluster)
    return math.sqrt(2.0 * (k["copy"] + (replicas - 1) * k["peer"]) * k["mtbf"])


def best_plans(cluster: dict, budget: float) -> dict:
    """Each kind of plan at its best (first order): storage alone, one local copy, two to four."""
    k = _costs(cluster)
    persistent = max(cluster["state_bytes"] / budget, math.sqrt(2.0 * k["copy"] * k["mtbf"]))
    plans = {"persistent_only": (persistent, None, 1)}
    plans.update({f"local_{r}": (persistent, young_local(cluster, r), r) for r in range(1, MAX_REPLICAS + 1)})
    return plans


def _table5_causes(rng) -> list:
    """Llama 3's Table 5 causes (its counts over its 16,384 GPUs' 54 days), their rates scaled alike."""
    from ckptlab.frontier.published import TABLE_5

    scale = float(rng.uniform(0.6, 1.5)) / (16_384 * 54 * 24)
    return [{"name": name, "per_gpu_hour": count * scale, "host_lost": lost} for name, _, count, lost in TABLE_5]


def _plan_cluster(rng, category: str) -> dict:
    gpus = int(_pick(rng, (8192, 12288, 16384, 24576, 32768)))
    if category == "llama_like":
        causes = _table5_causes(rng)
    else:
        mtbf = float(rng.uniform(2.0, 5.0)) * HOUR
        lost = float(rng.uniform(0.85, 0.95) if category == "host_heavy" else rng.uniform(0.6, 0.8))
        total = HOUR / mtbf / gpus
        causes = [{"name": n, "per_gpu_hour": float(total * lost * s), "host_lost": True}
                  for n, s in zip(HOST_LOST[:4], _shares(rng, 4, 1.0))]
        causes += [{"name": n, "per_gpu_hour": float(total * (1 - lost) * s), "host_lost": False}
                   for n, s in zip(HOST_KEPT[:3], _shares(rng, 3, 1.0))]
        if category == "rack":  # a few failures more take the host's peers too: a rack's power or switch
            causes.append({"name": "Rack power", "per_gpu_hour": float(total * rng.uniform(0.02, 0.05)),
                           "host_lost": True, "peers_lost": True})
    mtbf = HOUR / (gpus * sum(c["per_gpu_hour"] for c in causes))
    peers = (3.125e9, 6.25e9) if category == "slow_peers" else (12.5e9, 25e9, 50e9)
    return {"gpus": gpus, "causes": causes, "state_bytes": float(_pick(rng, (70e9, 175e9, 405e9))) * 16,
            "storage_bandwidth": float(_pick(rng, (1e12, 2e12, 4e12))),
            "restart": float(round(min(float(rng.uniform(300, 900)), 0.06 * mtbf))), "gpus_per_host": 8,
            "host_bandwidth": 25e9, "peer_bandwidth": float(_pick(rng, peers)),
            "local_copy": round(float(rng.uniform(0.5, 3.0)), 2),
            "planned_per_day": round(float(rng.uniform(0.5, 1.5)), 2) if category == "planned" else 0.0}


def _plan_case(rng, category: str) -> Case:
    """A cluster, a budget that holds storage saves to a long interval (30-50% of the job's MTBF; 55-80%
    for a tight one), and the target: the best plan's first-order goodput less the margin."""
    cluster = _plan_cluster(rng, category)
    share = float(rng.uniform(0.55, 0.8) if category == "tight_budget" else rng.uniform(0.3, 0.5))
    budget = float(f"{cluster['state_bytes'] / (share * _costs(cluster)['mtbf']):.4g}")
    best = max(plan_goodput(cluster, *plan) for plan in best_plans(cluster, budget).values())
    return Case(category, (cluster, math.floor((best - TARGET_MARGIN) * 1000) / 1000, budget))


def _plan_cases(rng):
    kinds = ("llama_like", "llama_like", "host_heavy", "host_heavy", "planned", "planned", "tight_budget",
             "tight_budget", "slow_peers", "rack", "rack")
    return [_plan_case(rng, k) for k in kinds]


def _diagnose_plan(args, actual, expected):
    cluster, _, budget = args
    broken = broken_rule(actual, expected)
    if broken:
        return "over_budget" if "budget" in broken else "replicas" if "replicas" in broken else "intervals"
    k = _costs(cluster)
    if k["racks"] > 0 and float(actual["persistent_interval"]) > 3.0 * max(cluster["state_bytes"] / budget,
                                                                           math.sqrt(2.0 * k["copy"] * k["mtbf"])):
        return "rare_persistent"
    if actual["local_interval"] is None:
        return "no_local"
    replicas = int(actual["replicas"])
    if replicas == 1 and _costs(cluster)["lost"] >= 0.5:
        return "one_replica"
    ratio = float(actual["local_interval"]) / young_local(cluster, replicas)
    if ratio > 3.0:
        return "local_too_long"
    if ratio < 1 / 3:
        return "local_too_short"
    return None


def _hidden_judging(cluster: dict, target_goodput: float, write_budget: float) -> dict:
    """A hidden case's judging data: its runs' seeds derived from the case and the course's salt, so
    that a learner who knows the case's arguments (as its function does) still cannot replay the
    judge's traces unless the salt is the public default."""
    from autograder.units.unit10 import PROBLEMS

    public = any(ex.args == (cluster, target_goodput, write_budget) for p in PROBLEMS if p.function == "tier_plan"
                 for ex in p.examples)  # (a public example is judged on the traces the notebook's check uses)
    return judging(cluster, target_goodput, write_budget,
                   secret="" if public else os.environ.get("CKPT_COURSE_SALT", ""))


PLAN = Hidden(
    generate=_plan_cases,
    messages={
        "intervals": "Intervals are positive, finite seconds of training (local_interval None: no local tier).",
        "replicas": f"replicas is the number of copies of each host's local checkpoint: 1 to {MAX_REPLICAS}.",
        "over_budget": "Your plan writes more to storage than the budget allows: the whole state once every "
                       "persistent interval, on average, must fit within write_budget (bytes per second).",
        "no_local": "Your plan saves to storage only: the budget allows a persistent save only every "
                    "state_bytes / write_budget seconds, a large part of the job's MTBF, and every failure loses "
                    "half of that on average. A local tier lets the job save far more often, within the budget.",
        "one_replica": "Your local tier holds one copy of each host's share (replicas 1), and most failures here "
                       "take their host with them (host_lost): its local checkpoint goes too, the tier is "
                       "incomplete, and the restore falls back to storage, a long interval back. A second copy on "
                       "a peer survives the loss of one host.",
        "local_too_long": "Your local interval is far longer than the best one (Young's, from the local save's "
                          "blocking time and the job's MTBF): every failure loses half an interval of work. Check "
                          "the job's MTBF (all GPUs, every cause, in seconds).",
        "local_too_short": "Your local interval is far shorter than the best one (Young's, from the local save's "
                           "blocking time and the job's MTBF): the saves' blocking time (the copy out of the GPUs, "
                           "and a peer copy per extra replica) takes more than the failures it spares. Check the "
                           "job's MTBF (all GPUs, every cause, in seconds).",
        "llama_like": "Your plan's mean goodput falls short of the target on a cluster with Llama 3's causes of "
                      "failure.",
        "host_heavy": "Your plan's mean goodput falls short of the target where nearly every failure takes its "
                      "host's local data.",
        "planned": "Your plan's mean goodput falls short of the target on a cluster with planned interruptions too.",
        "tight_budget": "Your plan's mean goodput falls short of the target under a tight write budget.",
        "slow_peers": "Your plan's mean goodput falls short of the target where copying to a peer is slow: each "
                      "extra replica adds to every local save's blocking time.",
        "rack": "Your plan's mean goodput falls short of the target where some failures take a host's peers too "
                "(peers_lost): every local copy of that host's share is gone, and the run goes back to its newest "
                "persistent checkpoint.",
        "rare_persistent": "Your plan saves to storage far less often than the budget allows. Peers' copies survive "
                           "the loss of one host, not of a rack (peers_lost): such a failure leaves only the "
                           "persistent tier, and the run goes back to its newest save there.",
    },
    diagnose=_diagnose_plan,
    requirements={
        "`cluster[\"state_bytes\"] / persistent_interval` must not exceed it": ("tight_budget", "llama_like"),
        "its mean goodput must reach `target_goodput`": (
            "llama_like", "host_heavy", "planned", "tight_budget", "slow_peers"),
        "whether it takes its host's local data with it (`host_lost`)": ("host_heavy", "llama_like"),
        "its peers' copies too (`peers_lost`, a rack's power)": ("rack",),
    },
    on_exception="`cluster` is plain data (Cluster.as_dict()); return a dict with the three keys.",
    expected=_hidden_judging,
)


# ---------------------------------------------------------------------------------------------
# 10.3 storage_bandwidth_needed

CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 master weights (4), Adam's two moments (4 + 4)
BANDWIDTH_REL = 1e-4  # 10.3's tolerance (its return spec's)


def _bandwidth_case(rng, category: str) -> Case:
    """A job whose restarts take a share of the overhead allowed: a small one (``loose``), most of it
    (``tight``), all of it or more (``unreachable``)."""
    gpus = int(_pick(rng, (256, 512, 1024, 2048) if category == "small_job" else (8192, 16384, 32768, 65536)))
    per_gpu = float(round(rng.uniform(3.0, 10.0) * 8766))  # one GPU's MTBF: 3 to 10 years, in hours
    mtbf = per_gpu * HOUR / gpus
    params = float(_pick(rng, (405e9, 671e9, 1e12) if category == "large_model" else (7e9, 13e9, 34e9, 70e9, 175e9)))
    overhead = round(float(rng.uniform(0.05, 0.2)), 3)
    share = {"loose": (0.05, 0.2), "tight": (0.7, 0.9), "unreachable": (1.05, 2.0)}.get(category, (0.2, 0.6))
    restart = float(round(float(rng.uniform(*share)) * overhead * mtbf))
    return Case(category, (params, gpus, per_gpu, max(restart, 1.0), overhead))


def _bandwidth_cases(rng):
    kinds = ("typical", "typical", "small_job", "small_job", "large_model", "large_model", "loose", "loose",
             "tight", "tight", "unreachable", "unreachable")
    return [_bandwidth_case(rng, k) for k in kinds]


def bandwidth_truth(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    """10.3's answer, by the reference's arithmetic."""
    mtbf = per_gpu_mtbf_hours * HOUR / gpus
    left = max_overhead - restart_seconds / mtbf
    if left <= 0:
        raise ValueError(f"no bandwidth can keep the overhead within {max_overhead}: the restarts alone cost "
                         f"{restart_seconds / mtbf:.4f} (a {restart_seconds} s restart every {mtbf:.0f} s)")
    delta = left * left * mtbf / 2.0
    return params * CHECKPOINT_BYTES_PER_PARAM / delta


def _bandwidth_mistakes(args) -> dict:
    """What each classic mistake returns on these arguments (None where it finds no bandwidth)."""
    params, gpus, per_gpu, restart, overhead = args

    def need(bytes_per_param=12, mtbf=per_gpu * HOUR / gpus, restart=restart, delta_of=lambda x, m: x * x * m / 2):
        left = overhead - restart / mtbf
        return params * bytes_per_param / delta_of(left, mtbf) if left > 0 else None

    mtbf = per_gpu * HOUR / gpus
    return {"bf16_weights_only": need(2), "with_bf16_weights": need(14), "training_state": need(16),
            "fp32_weights_only": need(4), "per_gpu_mtbf": need(mtbf=mtbf * gpus),
            "hours_as_seconds": need(mtbf=per_gpu / gpus), "no_restart": need(restart=0.0),
            "no_square": need(delta_of=lambda x, m: x * m / 2), "no_half": need(delta_of=lambda x, m: x * x * m),
            "saves_share_only": need(delta_of=lambda x, m: 2 * x * x * m)}


def _diagnose_bandwidth(args, actual, expected):
    a = float(actual)
    if not math.isfinite(a) or a <= 0:
        return None
    for name, wrong in _bandwidth_mistakes(args).items():
        if wrong is not None and math.isclose(a, wrong, rel_tol=1e-3) and not math.isclose(wrong, expected, rel_tol=1e-3):
            return name
    return None


def _names_the_restart(args, message: str) -> bool:
    """The ValueError says why: the restarts (the statement's word)."""
    return "restart" in message.lower()


BANDWIDTH = Hidden(
    generate=_bandwidth_cases,
    messages={
        "should_raise": "Raise ValueError where no bandwidth can keep the overhead within max_overhead: the restarts "
                        "alone (restart_seconds once per job MTBF) already take that share, whatever the saves cost.",
        "wrong_exception": "Raise ValueError (or a subclass) where the restarts alone take max_overhead or more.",
        "unclear_error": "Your ValueError should say why no bandwidth can: name the restarts in its message, as the "
                         "statement asks.",
        "bf16_weights_only": "Your checkpoint holds 2 bytes a parameter (the bfloat16 weights): a restart needs the "
                             "float32 master weights and Adam's two moments, 4 bytes each.",
        "with_bf16_weights": "Your checkpoint holds the bfloat16 weights too (14 bytes a parameter): the statement's "
                             "checkpoint holds the float32 master weights and Adam's two moments only.",
        "training_state": "Your checkpoint holds the whole training state, 16 bytes a parameter: the bfloat16 "
                          "weights and the gradients are never saved, only the float32 master weights and Adam's "
                          "two moments.",
        "fp32_weights_only": "Your checkpoint holds the float32 weights alone: a restart also needs Adam's two "
                             "moments, 4 bytes a parameter each.",
        "per_gpu_mtbf": "Your bandwidth uses one GPU's MTBF for the job's: any GPU's failure stops the job, so it "
                        "fails gpus times as often (the job's MTBF is one GPU's over the number of GPUs).",
        "hours_as_seconds": "per_gpu_mtbf_hours is in hours: the job's MTBF must be in seconds (x 3600) before it "
                            "meets restart_seconds and the save's time.",
        "no_restart": "Your bandwidth leaves the restarts out of the overhead: each failure costs restart_seconds "
                      "too, so the saves may take only what is left of max_overhead.",
        "no_square": "The saves' share of the overhead at Young's interval is sqrt(2 delta / M): solving it for "
                     "delta squares what is left of the overhead.",
        "no_half": "The saves' share of the overhead at Young's interval is sqrt(2 delta / M), with its 2: "
                   "delta is half of (what is left)^2 x M.",
        "saves_share_only": "Your overhead counts only the time saves stop training, delta / tau: at Young's interval "
                            "the work failures lose, tau / (2 M), is as large, and the two together are "
                            "sqrt(2 delta / M).",
        "typical": "Wrong on a typical job.",
        "small_job": "Wrong on a job of a few hundred to a few thousand GPUs.",
        "large_model": "Wrong on a model of hundreds of billions of parameters or more.",
        "loose": "Wrong where the restarts take a small part of the overhead allowed.",
        "tight": "Wrong where the restarts take most of the overhead allowed: the saves must be fast.",
        "unreachable": "Wrong where the restarts alone take the whole overhead allowed: raise ValueError.",
    },
    diagnose=_diagnose_bandwidth,
    check_raise=_names_the_restart,
    requirements={
        "the float32 master weights and Adam's two moments": ("typical", "large_model", "small_job"),
        "never the bfloat16 weights or the gradients": ("typical", "large_model", "small_job"),
        "must not exceed `max_overhead`": ("typical", "tight", "loose"),
        "Raise `ValueError` where no bandwidth can": ("unreachable",),
        "its message naming the restarts as the reason": ("unreachable",),
        "on average once every `per_gpu_mtbf_hours` hours": ("typical", "small_job", "tight"),
    },
    on_exception="Raise only where no bandwidth suffices (a ValueError), and only after the job's MTBF is right: "
                 "one GPU's over the GPUs, in seconds (per_gpu_mtbf_hours is in hours), before comparing the "
                 "restarts with it.",
    expected=bandwidth_truth,
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "checkpoint_interval": INTERVAL,
    "tier_plan": PLAN,
    "storage_bandwidth_needed": BANDWIDTH,
}
