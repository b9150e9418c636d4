"""Published figures of a frontier run, each with where it was published, and what they give the
simulation (:mod:`ckptlab.frontier.simulation`).

Llama 3 405B: Meta's "The Llama 3 Herd of Models" (Llama Team, AI @ Meta, 2024; arXiv:2407.21783),
section 3.3.4, "Reliability and operational challenges", and its Table 5:
- 16,384 H100 GPUs (8 a server); a 54-day snapshot of pre-training; 466 job interruptions, 47
  planned (automated maintenance: firmware upgrades, operator-initiated configuration or dataset
  updates) and 419 unexpected, about one every three hours; more than 90% effective training time;
- storage: Tectonic, 2 TB/s sustainable and 7 TB/s peak throughput; checkpoints of 1 MB to 4 GB per
  GPU (section 3.3.1);
- Table 5's unexpected interruptions by root cause (counts below; they add up to 419). The paper's
  percentage beside "Faulty GPU" (30.1%) is not 148 / 419 (35.3%); the other rows' percentages are
  their counts over 419. The counts are used here.

Which causes take their host's local data (``host_lost``) is this course's reading, not the
paper's: a GPU, memory or host fault drains the host (its memory and disks leave the job with it);
a software bug, a dependency, a network switch or cable, or a collective's timeout restarts the
job's processes on the same hosts, whose local checkpoints survive.
"""

from __future__ import annotations

import numpy as np

from ckptlab.frontier.formulas import CHECKPOINT_BYTES_PER_PARAM, DAY, TRAINING_STATE_BYTES_PER_PARAM
from ckptlab.frontier.simulation import Cause, Cluster, Trace

SOURCE = "The Llama 3 Herd of Models (Llama Team, AI @ Meta, 2024), arXiv:2407.21783, section 3.3.4 and Table 5"
GPUS = 16_384
GPUS_PER_HOST = 8
DAYS = 54
INTERRUPTIONS = 466
PLANNED = 47
UNEXPECTED = 419
EFFECTIVE_TRAINING_TIME = 0.90  # "higher than 90%"
STORAGE_SUSTAINED = 2e12  # bytes per second (2 TB/s)
STORAGE_PEAK = 7e12
CHECKPOINT_PER_GPU = (1e6, 4e9)  # bytes, smallest and largest
PARAMETERS = 405e9

# Table 5: (component, its category in the paper, interruptions in 54 days, host lost: this course's reading)
TABLE_5 = (
    ("Faulty GPU", "GPU", 148, True),
    ("GPU HBM3 Memory", "GPU", 72, True),
    ("Software Bug", "Dependency", 54, False),
    ("Network Switch/Cable", "Network", 35, False),
    ("Host Maintenance", "Unplanned Maintenance", 32, True),
    ("GPU SRAM Memory", "GPU", 19, True),
    ("GPU System Processor", "GPU", 17, True),
    ("NIC", "Host", 7, True),
    ("NCCL Watchdog Timeouts", "Unknown", 7, False),
    ("Silent Data Corruption", "GPU", 6, True),
    ("GPU Thermal Interface + Sensor", "GPU", 6, True),
    ("SSD", "Host", 3, True),
    ("Power Supply", "Host", 3, True),
    ("Server Chassis", "Host", 2, True),
    ("IO Expansion Board", "Host", 2, True),
    ("Dependency", "Dependency", 2, False),
    ("CPU", "Host", 2, True),
    ("System Memory", "Host", 2, True),
)


def causes() -> tuple[Cause, ...]:
    """Table 5's causes, each with its rate per GPU-hour: its count over the snapshot's GPU-hours."""
    gpu_hours = GPUS * DAYS * 24
    return tuple(Cause(name, count / gpu_hours, lost) for name, _, count, lost in TABLE_5)


def state_bytes(bytes_per_param: float = TRAINING_STATE_BYTES_PER_PARAM) -> float:
    """405B parameters' training state: 16 bytes a parameter for mixed-precision Adam (6.48 TB);
    ``CHECKPOINT_BYTES_PER_PARAM`` (12) for what a restart needs."""
    return PARAMETERS * bytes_per_param


def cluster(restart: float = 600.0, bytes_per_param: float = TRAINING_STATE_BYTES_PER_PARAM, **changes) -> Cluster:
    """Llama 3's job as published: its GPUs, Table 5's causes, its planned interruptions, Tectonic's
    sustained bandwidth, a 405B model's training state. The restart's cost is not published: it is
    the caller's (10 minutes unless said)."""
    fields = dict(gpus=GPUS, causes=causes(), state_bytes=state_bytes(bytes_per_param),
                  storage_bandwidth=STORAGE_SUSTAINED, restart=restart, gpus_per_host=GPUS_PER_HOST,
                  planned_per_day=PLANNED / DAYS)
    return Cluster(**{**fields, **changes})


def table_trace(rng: np.random.Generator) -> Trace:
    """A trace with Table 5's counts exactly (419 unexpected, each cause its count) and the 47 planned
    interruptions, at times drawn uniformly over the 54 days (a Poisson process's times, given its
    count)."""
    kinds = np.concatenate([np.full(count, i) for i, (_, _, count, _) in enumerate(TABLE_5)] + [np.full(PLANNED, -1)])
    times = rng.uniform(0, DAYS * DAY, len(kinds))
    order = np.argsort(times, kind="stable")
    return Trace(times[order], kinds[order])


__all__ = ["CHECKPOINT_BYTES_PER_PARAM", "SOURCE", "TABLE_5", "causes", "cluster", "state_bytes", "table_trace"]
