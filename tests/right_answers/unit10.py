"""Unit 10's curated right answers, keyed by function name (see tests/right_answers/__init__.py):
correct solutions written unlike the reference in solutions/unit10.py: Daly's higher-order interval
and the exact goodput, a Monte Carlo by hand, the library's own simulation, numerical searches where
the reference has a closed form, and plans found by simulating candidates."""

from autograder.units.unit10 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

INTERVAL = [
    # Daly's (2006) interval and his exact expected goodput for exponential failures, the write's lag
    # counted with the restart (a failure within it goes back one more checkpoint).
    ("dalys_interval_and_the_exact_goodput", """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    per_second = sum(failures_per_gpu_hour.values()) / 3600 * gpus
    m = 1 / per_second
    x = blocking_seconds / (2 * m)
    tau = math.sqrt(2 * blocking_seconds * m) * (1 + math.sqrt(x) / 3 + x / 9) - blocking_seconds
    lost = restart_seconds + async_seconds
    goodput = tau / (m * math.exp(lost / m) * math.expm1((tau + blocking_seconds) / m))
    return float(tau), float(goodput)
"""),
    # A Monte Carlo by hand, in NumPy: two million times between failures; after each failure the
    # restart, then saves every interval, each restorable once its write is done.
    ("numpy_monte_carlo", """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    mtbf_hours = 1 / (gpus * sum(failures_per_gpu_hour.values()))
    mtbf = mtbf_hours * 3600
    tau = (2 * blocking_seconds * mtbf) ** 0.5
    between = np.random.default_rng(7).exponential(mtbf, 2_000_000)
    training = between - restart_seconds - async_seconds  # the last save must also be written
    saves = np.clip(np.floor(training / (tau + blocking_seconds)), 0, None)
    return tau, float((saves * tau).sum() / between.sum())
"""),
    # The library's own simulation: one tier, asynchronous saves, a Cluster whose write takes the
    # asynchronous part and whose restart plus the checkpoint's read takes restart_seconds;
    # about 8,000 failures.
    ("the_librarys_simulation", """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    from ckptlab.frontier.simulation import Cause

    causes = tuple(Cause(name, rate) for name, rate in failures_per_gpu_hour.items())
    cluster = Cluster(gpus=gpus, causes=causes, state_bytes=async_seconds * 1e9, storage_bandwidth=1e9,
                      restart=restart_seconds - async_seconds, local_copy=blocking_seconds)
    tau = math.sqrt(2 * blocking_seconds * cluster.mtbf)
    run = simulate(cluster, Plan(tau), days=8000 * cluster.mtbf / 86400, seed=3)
    return tau, run.goodput
"""),
    # No formula for the interval: a golden-section search for the least first-order overhead.
    ("golden_section_search", """
def _overhead(tau, delta, lag, restart, mtbf):
    return delta / tau + (tau / 2 + lag + restart) / mtbf


def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    mtbf = 3600 / gpus / sum(failures_per_gpu_hour[c] for c in failures_per_gpu_hour)
    args = (blocking_seconds, async_seconds, restart_seconds, mtbf)
    lo, hi = blocking_seconds / 100, mtbf
    ratio = (5 ** 0.5 - 1) / 2
    for _ in range(200):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if _overhead(a, *args) < _overhead(b, *args):
            hi = b
        else:
            lo = a
    tau = (lo + hi) / 2
    return tau, 1 - _overhead(tau, *args)
"""),
]

PLAN = [
    # Candidates simulated with the library itself, each on two short runs: the best one wins.
    ("simulated_candidates", """
def tier_plan(cluster, target_goodput, write_budget):
    job = Cluster.from_dict(cluster)
    persistent = job.state_bytes / write_budget
    best = None
    for replicas in (1, 2, 3):
        delta = job.local_copy + (replicas - 1) * job.peer_seconds()
        for factor in (0.5, 1.0, 2.0):
            plan = Plan(persistent, factor * math.sqrt(2 * delta * job.mtbf), replicas)
            mean = np.mean([simulate(job, plan, 10, seed).goodput for seed in (101, 202)])
            if best is None or mean > best[0]:
                best = (mean, plan)
    plan = best[1]
    return {"persistent_interval": plan.persistent_interval, "local_interval": plan.local_interval,
            "replicas": plan.replicas}
"""),
    # Always two copies (one on a peer), locally at Daly's interval; storage as often as the budget allows.
    ("two_copies_at_dalys_interval", """
def tier_plan(cluster, target_goodput, write_budget):
    per_second = sum(c["per_gpu_hour"] for c in cluster["causes"]) * cluster["gpus"] / 3600
    mtbf = 1 / per_second
    share = cluster["state_bytes"] / (cluster["gpus"] // cluster["gpus_per_host"])
    delta = cluster["local_copy"] + share / cluster["peer_bandwidth"]
    x = delta / (2 * mtbf)
    local = math.sqrt(2 * delta * mtbf) * (1 + math.sqrt(x) / 3 + x / 9) - delta
    return {"persistent_interval": cluster["state_bytes"] / write_budget * 1.0001, "local_interval": local,
            "replicas": 2}
"""),
    # A scan of local intervals on a logarithmic grid, for 2 to 4 copies, by first-order overhead.
    ("first_order_scan", """
def tier_plan(cluster, target_goodput, write_budget):
    job = Cluster.from_dict(cluster)
    grid = np.geomspace(1.0, job.mtbf / 2, 4000)
    best = None
    for replicas in (2, 3, 4):
        blocking = job.local_copy + (replicas - 1) * job.peer_seconds()
        overhead = blocking / grid + grid / (2 * job.mtbf)
        i = int(np.argmin(overhead))
        if best is None or overhead[i] < best[0]:
            best = (overhead[i], float(grid[i]), replicas)
    return {"persistent_interval": float(np.ceil(job.state_bytes / write_budget)), "local_interval": best[1],
            "replicas": best[2]}
"""),
]

BANDWIDTH = [
    # Bisection on the bandwidth itself: the overhead falls as the bandwidth grows.
    ("bisection_on_the_bandwidth", """
def storage_bandwidth_needed(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    m = per_gpu_mtbf_hours / gpus * 3600
    if restart_seconds / m >= max_overhead:
        raise ValueError(f"restarts of {restart_seconds} s every {m:.0f} s already cost {restart_seconds / m:.1%}")
    size = params * (4 + 4 + 4)

    def overhead(bandwidth):
        return math.sqrt(2 * size / bandwidth / m) + restart_seconds / m

    lo, hi = 1.0, 1e30
    for _ in range(400):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if overhead(mid) > max_overhead else (lo, mid)
    return hi
"""),
    # Young's interval first: at the optimum the saves' share sqrt(2 delta / M) is tau / M, so tau is
    # what is left times M, and a save may last tau squared over 2 M.
    ("youngs_interval_first", """
def storage_bandwidth_needed(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    mtbf = 3600.0 * per_gpu_mtbf_hours / gpus
    budget_for_saves = max_overhead - restart_seconds / mtbf
    if not budget_for_saves > 0:
        raise ValueError("the restart alone uses up max_overhead: no storage is fast enough")
    tau = budget_for_saves * mtbf
    delta = tau * tau / (2 * mtbf)
    checkpoint = 4 * params + 2 * 4 * params  # fp32 master weights; Adam's mu and nu
    return checkpoint / delta
"""),
    # In hours throughout, converted to seconds at the end.
    ("in_hours", """
def storage_bandwidth_needed(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    job_hours = per_gpu_mtbf_hours / gpus
    restart_hours = restart_seconds / 3600
    spare = max_overhead - restart_hours / job_hours
    if spare <= 0:
        raise ValueError(f"no bandwidth helps: restarts take {restart_hours / job_hours:.3f} of the time")
    save_hours = spare ** 2 * job_hours / 2
    return 12 * params / (save_hours * 3600)
"""),
]

RIGHT = {
    "checkpoint_interval": INTERVAL,
    "tier_plan": PLAN,
    "storage_bandwidth_needed": BANDWIDTH,
}
