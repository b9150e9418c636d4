"""Unit 10, Checkpointing a frontier run: its record and its problems. Public: what learners may see
(statements, signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit10.py``,
keyed by function name; references: ``solutions/unit10.py``."""

from __future__ import annotations

from autograder.declarations import Example, Problem, Unit
from autograder.wall.plan_returns import TierPlan
from autograder.wall.returns import Close, Raises

UNIT = Unit(
    number=10,
    title="Checkpointing a frontier run",
    intro=(
        "A synchronous job on thousands of GPUs fails every few hours: at that scale how often to save, where to, "
        "and how fast storage must be are questions of arithmetic and of simulation, from published figures (Meta's "
        "Llama 3 405B run: 16,384 GPUs, 419 failures in 54 days). Find the interval between saves and the goodput it "
        "gives from per-GPU failure rates, design a plan of checkpoint tiers under a write budget that the grader "
        "simulates on hidden failure traces, and the storage bandwidth a goodput target needs. The lesson is "
        "`course/10_frontier_run.ipynb`."
    ),
    notebook="unit10_frontier_run.ipynb",
    lesson="10_frontier_run.ipynb",
    lesson_figures=4,  # the lesson draws: job MTBF against scale, goodput against the interval, a run's time budget, goodput against scale
    # the problem notebook's import cell
    imports=(
        "import math\n"
        "\n"
        "import numpy as np\n"
        "\n"
        "from autograder.notebook import problem\n"
        "from ckptlab.frontier.simulation import Cluster, Plan, simulate"
    ),
)

# Llama 3 405B's pre-training (arXiv:2407.21783, Table 5): 419 unexpected interruptions in 54 days on
# 16,384 GPUs, grouped here in four causes (GPU, host, software and network faults), each a rate per
# GPU-hour: its count over the snapshot's GPU-hours.
_GPU_HOURS = 16_384 * 54 * 24
_LLAMA3 = {"GPU": 268 / _GPU_HOURS, "Host": 53 / _GPU_HOURS, "Software": 56 / _GPU_HOURS, "Network": 42 / _GPU_HOURS}
_LOSES_HOST = {"GPU": True, "Host": True, "Software": False, "Network": False}


def _causes(rates: dict, scale: float = 1.0) -> list:
    return [{"name": name, "per_gpu_hour": rate * scale, "host_lost": _LOSES_HOST[name]} for name, rate in rates.items()]


def _cluster(gpus, causes, state_bytes, storage_bandwidth, restart, peer_bandwidth, local_copy, planned_per_day=0.0):
    """A cluster as ``Cluster.as_dict()`` gives it (8 GPUs a host, each writing at most 25 GB/s)."""
    return {"gpus": gpus, "causes": causes, "state_bytes": state_bytes, "storage_bandwidth": storage_bandwidth,
            "restart": restart, "gpus_per_host": 8, "host_bandwidth": 25e9, "peer_bandwidth": peer_bandwidth,
            "local_copy": local_copy, "planned_per_day": planned_per_day}


_LLAMA3_CLUSTER = _cluster(16_384, _causes(_LLAMA3), 405e9 * 16, 2e12, 600.0, 25e9, 1.0, 47 / 54)
# (and a cause Llama 3's table does not have: a rack's power, taking a host and its peers' copies with it)
_RACK = {"name": "Rack power", "per_gpu_hour": 20 / _GPU_HOURS, "host_lost": True, "peers_lost": True}
_SMALL_CLUSTER = _cluster(4096, _causes(_LLAMA3, 2.0) + [_RACK], 70e9 * 16, 0.5e12, 300.0, 12.5e9, 0.5)
_SOFTWARE_CLUSTER = _cluster(8192, [{"name": "GPU", "per_gpu_hour": 40 / _GPU_HOURS, "host_lost": True},
                                    {"name": "Software", "per_gpu_hour": 200 / _GPU_HOURS, "host_lost": False},
                                    {"name": "Network", "per_gpu_hour": 60 / _GPU_HOURS, "host_lost": False}],
                             175e9 * 16, 1e12, 450.0, 6.25e9, 2.0)

PROBLEMS = (
    Problem(
        id="10.1",
        function="checkpoint_interval",
        signature=("gpus", "failures_per_gpu_hour", "blocking_seconds", "async_seconds", "restart_seconds"),
        points=15,
        title="How often to save, and the goodput it gives",
        statement=(
            "A synchronous training job runs on `gpus` GPUs. `failures_per_gpu_hour` maps each cause of failure to "
            "its rate, in failures per GPU-hour: every GPU fails independently of the others, at these constant "
            "rates, and any failure stops the whole job. Each checkpoint save stops training for `blocking_seconds` "
            "(the copy out of device memory); its write then goes on for `async_seconds` while training runs, and "
            "the checkpoint can be restored only once that write has finished. After a failure the job restarts "
            "from its newest restorable checkpoint and redoes the work since; the restart, reading the checkpoint "
            "included, takes `restart_seconds`. Return `(interval, goodput)`, two floats: Young's interval, the "
            "seconds of training between two saves that balance, to first order, the time saves stop training "
            "against the work failures lose; and the goodput at that interval, the expected share of wall-clock "
            "time whose training is kept, to first order in the interval, the write and the restart over the "
            "job's mean time between failures. An interval within 2% and a goodput within 0.004 of those are right: "
            "Daly's interval, the exact goodput or a long simulation's estimate pass too."
        ),
        returns=Close((("rel", 0.02), ("abs", 0.004)), ("interval", "goodput")),
        hints=(
            "Start with the job's mean time between failures, M: what is one GPU's rate of failure, given several "
            "causes, and the job's, given many GPUs? Mind the units: the rates are per hour, the other arguments "
            "are seconds.",
            "Per second of training, saving every tau costs delta / tau (delta: the time one save stops "
            "training; of the save's two parts, which one is that?), and failures cost about tau / (2 M) in lost "
            "work. Young's interval is the tau where their sum is least.",
            "To first order, a save costs delta every interval of training, and each failure (one every M seconds) "
            "costs half an interval of work on average, plus the time before the newest checkpoint is restorable, "
            "plus the restart. The goodput is what is left of 1.",
        ),
        examples=(
            Example((16_384, _LLAMA3, 1.0, 3.24, 600.0), (149.232, 0.932423),
                    "Llama 3 405B's run: its 419 failures in 54 days in four causes, a 1 s copy, its 6.48 TB written "
                    "in 3.24 s at 2 TB/s, a 10-minute restart"),
            Example((8192, _LLAMA3, 5.0, 120.0, 300.0), (471.913, 0.959950),
                    "half the GPUs, a 5 s copy and a 2-minute write: the write adds to what a failure loses, not to "
                    "what a save blocks"),
            Example((512, {"Faulty GPU": 2e-5}, 20.0, 60.0, 900.0), (3750.0, 0.986603),
                    "512 GPUs, one cause: a job MTBF of about 98 hours"),
        ),
        difficulty="medium",
        category="fault-tolerance",
        tags=("scale", "interval", "goodput"),
        forbidden=("ckptlab.frontier.formulas",),
        seen_in="Meta's Llama 3 405B pre-training (arXiv:2407.21783, section 3.3.4: 419 unexpected interruptions "
                "in 54 days on 16,384 GPUs)",
        why=(
            "Independent failures add their rates, so a job's MTBF is one GPU's over N. Saving costs delta / tau, "
            "failing tau / 2M: their sum is least at tau = sqrt(2 delta M). An async write costs no training, only "
            "its lag per failure."
        ),
        next_question=(
            "Doubling the GPUs halves M: by how much does the interval shrink, and the goodput drop? What would you "
            "shrink first to win it back?"
        ),
    ),
    Problem(
        id="10.2",
        function="tier_plan",
        signature=("cluster", "target_goodput", "write_budget"),
        points=20,
        title="A plan of checkpoint tiers for a frontier run",
        statement=(
            "A synchronous job checkpoints in two tiers, as Orbax's emergency manager does (Unit 8): a local tier, "
            "each host's share of the state in its own memory, and a persistent tier, the whole state in shared "
            "storage. `cluster` describes the job and its machine as plain data, `Cluster.as_dict()` of "
            "`ckptlab.frontier.simulation` (whose docstring gives each cost): its GPUs and hosts, its causes of "
            "failure, each with its rate per GPU-hour and whether it takes its host's local data with it "
            "(`host_lost`) and its peers' copies too (`peers_lost`, a rack's power), the state's bytes, the storage's bandwidth, the restart, the copy out of the GPUs, the "
            "bandwidth to a peer host, planned interruptions. Return a plan `{\"persistent_interval\": ..., "
            "\"local_interval\": ..., \"replicas\": ...}`: seconds of training between persistent saves (their "
            "writes asynchronous), between local saves (None: no local tier), and the copies of each host's local "
            "checkpoint, 1 to 4 (with 2 or more, a peer holds a copy of each host's share). The job may write to "
            "storage `write_budget` bytes per second on average, so `cluster[\"state_bytes\"] / "
            "persistent_interval` must not exceed it. The grader simulates your plan with `simulate`, on hidden "
            "failure traces (a few runs of several weeks), and its mean goodput must reach `target_goodput`."
        ),
        returns=TierPlan(),
        hints=(
            "Start from the budget: how often does it let the whole state go to storage, against the job's MTBF? "
            "What does a plan with storage alone lose at each failure, on average?",
            "A local save blocks for the copy out of the GPUs, plus a copy of the host's share to a peer for each "
            "extra replica. Which failures take a host's local checkpoint with them, and where does the restore "
            "come from then?",
            "Young's interval applies to the local tier, with its own blocking time. Try your plan before you "
            "submit it: `simulate(Cluster.from_dict(cluster), Plan(...), days, seed).goodput`, over a few seeds.",
        ),
        examples=(
            Example((_LLAMA3_CLUSTER, 0.90, 2e9), None,
                    "Llama 3's run, its 47 planned interruptions too, under a budget of 2 GB/s: a persistent save "
                    "every 54 minutes at most"),
            Example((_SMALL_CLUSTER, 0.962, 0.25e9), None,
                    "4,096 GPUs failing twice as often each, and racks failing too (peers_lost), a 70B model's state, a "
                    "budget of 250 MB/s"),
            Example((_SOFTWARE_CLUSTER, 0.96, 1e9), None,
                    "most failures here keep their host (software, network): one local copy does nearly as well "
                    "as two"),
        ),
        timeout=120.0,
        difficulty="hard",
        category="fault-tolerance",
        tags=("scale", "tiers", "simulation"),
        seen_in="Meta's Llama 3 405B pre-training (arXiv:2407.21783, Table 5: 321 of its 419 unexpected "
                "interruptions were GPU or host faults); Orbax's emergency (multi-tier) checkpointing",
        why=(
            "The budget holds storage saves to a long interval; a local tier saves often, but a failure that takes "
            "its host takes that host's copy too, so a second copy on a peer keeps the tier whole. Young's interval "
            "sets the local cadence."
        ),
        next_question=(
            "Two hosts holding copies of the same share fail together (a rack's power): what does the plan lose "
            "then, and how would you place replicas against it?"
        ),
    ),
    Problem(
        id="10.3",
        function="storage_bandwidth_needed",
        signature=("params", "gpus", "per_gpu_mtbf_hours", "restart_seconds", "max_overhead"),
        points=15,
        title="The storage bandwidth a goodput target needs",
        statement=(
            "A model of `params` parameters is trained with mixed-precision Adam on `gpus` GPUs. Each GPU fails "
            "independently, on average once every `per_gpu_mtbf_hours` hours, and any failure stops the job, which "
            "restarts from its newest checkpoint in `restart_seconds` (reading the checkpoint included) and redoes "
            "the work since. A checkpoint holds what a restart cannot do without: the float32 master weights and "
            "Adam's two moments, in float32; never the bfloat16 weights or the gradients. Saves are synchronous: "
            "training stops while the whole checkpoint is written to storage. Saving at Young's interval, the "
            "first-order overhead (one minus problem 10.1's goodput, with no asynchronous part) must not exceed "
            "`max_overhead`. Return the least storage bandwidth at which it stays within, in bytes per second, as "
            "a float (within a relative 1e-4). Raise `ValueError` where no bandwidth can, its message naming the "
            "restarts as the reason: they alone take that share or more."
        ),
        returns=Close((("rel", 1e-4),)),
        raises=("ValueError",),
        hints=(
            "Two quantities first: the checkpoint's bytes (how many bytes a parameter in each array it holds) and "
            "the job's MTBF M in seconds (one GPU's, and rates add).",
            "At Young's interval, the time saves stop training and the work failures lose are equal shares of "
            "the wall-clock time. Write their sum as a function of delta (one save's time) and M alone.",
            "The restarts take their share R / M first, whatever the bandwidth; what is left bounds the saves' "
            "share, hence delta. A bandwidth moves the checkpoint's bytes in delta seconds.",
        ),
        examples=(
            Example((405e9, 16_384, _GPU_HOURS / 419, 600.0, 0.10), 410_454_214_179.27,
                    "Llama 3 405B's run (one GPU's MTBF: 5.8 years), a 10-minute restart, at most 10% overhead: "
                    "about 410 GB/s"),
            Example((405e9, 16_384, _GPU_HOURS / 419, 120.0, 0.10), 109_652_035_601.58,
                    "the same with a 2-minute restart: the saves may take more of the overhead"),
            Example((70e9, 2048, 50_000.0, 300.0, 0.05), 8_807_313_477.78, "a 70B model on 2,048 GPUs, 5% overhead"),
            Example((405e9, 131_072, _GPU_HOURS / 419, 600.0, 0.10), Raises("ValueError", word="restart"),
                    "8 times the GPUs: a failure every 23 minutes, and a 10-minute restart alone takes 43%"),
        ),
        difficulty="medium",
        category="accounting",
        tags=("scale", "bandwidth", "goodput"),
        forbidden=("ckptlab.frontier.formulas",),
        why=(
            "At Young's interval the overhead is sqrt(2 delta / M) + R / M: the restarts' share comes first, and what "
            "is left, squared, times M / 2 bounds delta, so the bandwidth is 12 bytes a parameter over that delta."
        ),
        next_question=(
            "At 10x the GPUs, M falls tenfold: which grows faster, the bandwidth needed or the restarts' share, and "
            "when does no bandwidth suffice?"
        ),
    ),
)
