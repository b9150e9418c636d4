"""Unit 10's curated wrong answers, keyed by function name (see tests/wrong_answers/__init__.py): the
classic mistakes of checkpointing arithmetic at scale (one GPU's MTBF for the job's, hours taken for
seconds, the asynchronous write counted as blocking, the restart forgotten, the wrong bytes a
parameter), and plans of tiers that break a rule or miss the target."""

from autograder.units.unit10 import UNIT

IMPORTS = UNIT.imports + "\n"  # what these answers run with: the problem notebook's import cell

_INTERVAL = """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    mtbf = MTBF
    interval = math.sqrt(2 * DELTA * mtbf)
    goodput = 1 - DELTA / interval - (interval / 2 + LAG + RESTART) / mtbf
    return RESULT
"""


def _interval(mtbf="3600 / (gpus * sum(failures_per_gpu_hour.values()))", delta="blocking_seconds",
              lag="async_seconds", restart="restart_seconds", result="interval, goodput"):
    return (_INTERVAL.replace("MTBF", mtbf).replace("DELTA", delta).replace("LAG", lag).replace("RESTART", restart)
            .replace("RESULT", result))


INTERVAL = [
    ("per_gpu_mtbf", _interval(mtbf="3600 / sum(failures_per_gpu_hour.values())"), "incorrect",
     "sqrt(gpus) times too long"),
    ("mtbf_in_hours", _interval(mtbf="1 / (gpus * sum(failures_per_gpu_hour.values()))"), "incorrect",
     "failures per GPU-hour"),
    ("most_frequent_cause_only", _interval(mtbf="3600 / (gpus * max(failures_per_gpu_hour.values()))"), "incorrect",
     "most frequent cause alone"),
    ("async_write_counted_as_blocking", _interval(delta="(blocking_seconds + async_seconds)", lag="0"), "incorrect",
     "only blocking_seconds stops training"),
    ("restart_forgotten", _interval(restart="0"), "incorrect", "leaves out the restart"),
    ("async_lag_forgotten", _interval(lag="0"), "incorrect", "leaves out the asynchronous write"),
    ("goodput_at_the_whole_saves_interval", """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    mtbf = 3600 / (gpus * sum(failures_per_gpu_hour.values()))
    interval = math.sqrt(2 * blocking_seconds * mtbf)
    whole = math.sqrt(2 * (blocking_seconds + async_seconds) * mtbf)
    goodput = 1 - blocking_seconds / whole - (whole / 2 + async_seconds + restart_seconds) / mtbf
    return interval, goodput
""", "incorrect", "the one at another interval"),
    ("goodput_first", _interval(result="goodput, interval"), "incorrect", "in that order"),
    # The lesson's closed forms, called: the problem is to write them.
    ("the_lessons_formulas", """
def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    from ckptlab.frontier import formulas

    mtbf = formulas.job_mtbf_from_rates(failures_per_gpu_hour, gpus)
    interval = formulas.young_interval(blocking_seconds, mtbf)
    return interval, formulas.goodput_first_order(interval, blocking_seconds, restart_seconds, mtbf, async_seconds)
""", "incorrect", "the course's own ckptlab.frontier"),
]

_PLAN = """
def tier_plan(cluster, target_goodput, write_budget):
    causes = cluster["causes"]
    mtbf = MTBF
    hosts = cluster["gpus"] // cluster["gpus_per_host"]
    peer = cluster["state_bytes"] / hosts / cluster["peer_bandwidth"]
    replicas = REPLICAS
    blocking = cluster["local_copy"] + (replicas - 1) * peer
    local = math.sqrt(2 * blocking * mtbf)
    return {"persistent_interval": PERSISTENT, "local_interval": LOCAL, "replicas": replicas}
"""
_MTBF = '3600 / (cluster["gpus"] * sum(c["per_gpu_hour"] for c in causes))'
_BUDGET = 'cluster["state_bytes"] / write_budget'


def _plan(mtbf=_MTBF, replicas="2", persistent=_BUDGET, local="local"):
    return (_PLAN.replace("MTBF", mtbf).replace("REPLICAS", replicas).replace("PERSISTENT", persistent)
            .replace("LOCAL", local))


PLAN = [
    # Storage alone at Young's interval for the copy: far over the budget.
    ("storage_at_youngs_interval", _plan(persistent='math.sqrt(2 * cluster["local_copy"] * mtbf)', local="None",
                                         replicas="1"), "incorrect", "more to storage than the budget allows"),
    ("storage_alone_within_the_budget", _plan(local="None", replicas="1"), "incorrect", "saves to storage only"),
    ("one_local_copy", _plan(replicas="1"), "incorrect", "take their host with them"),
    ("one_gpus_mtbf", _plan(mtbf='3600 / sum(c["per_gpu_hour"] for c in causes)'), "incorrect",
     "far longer than the best one"),
    ("mtbf_in_hours", _plan(mtbf='1 / (cluster["gpus"] * sum(c["per_gpu_hour"] for c in causes))'), "incorrect",
     "far shorter than the best one"),
    ("a_copy_on_every_host_of_a_rack", _plan(replicas="8"), "incorrect", "1 to 4"),
    # Two copies, so storage "is not needed": saved once a week, the budget barely used. A rack's failure
    # (peers_lost) takes both copies of a host's share.
    ("peers_make_storage_needless", _plan(persistent="7 * 86400.0"), "incorrect", "not of a rack"),
]

_BANDWIDTH = """
def storage_bandwidth_needed(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    mtbf = MTBF
    left = max_overhead - RESTART / mtbf
    CHECK
    delta = DELTA
    return params * BYTES / delta
"""
_RAISE = 'if left <= 0:\n        raise ValueError("the restarts alone take the whole overhead")'


def _bandwidth(mtbf="per_gpu_mtbf_hours * 3600 / gpus", restart="restart_seconds", check=_RAISE,
               delta="left ** 2 * mtbf / 2", size="12"):
    return (_BANDWIDTH.replace("MTBF", mtbf).replace("RESTART", restart).replace("CHECK", check)
            .replace("DELTA", delta).replace("BYTES", size))


BANDWIDTH = [
    ("the_whole_training_state", _bandwidth(size="16"), "incorrect", "16 bytes a parameter"),
    ("bfloat16_weights_only", _bandwidth(size="2"), "incorrect", "2 bytes a parameter"),
    ("one_gpus_mtbf", _bandwidth(mtbf="per_gpu_mtbf_hours * 3600"), "incorrect", "one GPU's MTBF for the job's"),
    ("restarts_forgotten", _bandwidth(restart="0"), "incorrect", "leaves the restarts out"),
    ("the_square_root_dropped", _bandwidth(delta="left * mtbf / 2"), "incorrect", "squares what is left"),
    ("youngs_2_forgotten", _bandwidth(delta="left ** 2 * mtbf"), "incorrect", "with its 2"),
    ("no_value_error", _bandwidth(check="pass"), "incorrect", "Raise ValueError where no bandwidth"),
    ("a_silent_value_error", _bandwidth(check='if left <= 0:\n        raise ValueError("no")'), "incorrect",
     "name the restarts"),
    ("mtbf_in_hours", _bandwidth(mtbf="per_gpu_mtbf_hours / gpus"), "error", "per_gpu_mtbf_hours is in hours"),
]

WRONG = {
    "checkpoint_interval": INTERVAL,
    "tier_plan": PLAN,
    "storage_bandwidth_needed": BANDWIDTH,
}
