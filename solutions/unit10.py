"""Reference solutions for Unit 10: checkpointing a frontier run.

Closed forms, written out (the lesson's ``ckptlab.frontier.formulas`` holds the same, and the
problems ask for them by hand): a job's MTBF from per-GPU rates, Young's interval, the first-order
goodput and overhead. Problem 10.2's plan is graded by the simulation; its reference chooses the
plan whose first-order goodput is the best.
"""

from __future__ import annotations

import math

HOUR = 3600.0


def checkpoint_interval(gpus, failures_per_gpu_hour, blocking_seconds, async_seconds, restart_seconds):
    # Every GPU's every cause adds its rate: the job fails at the sum, per second.
    rate = gpus * sum(failures_per_gpu_hour.values()) / HOUR
    mtbf = 1.0 / rate
    # Young: only the blocking part stops training; the write behind it costs only at a failure.
    interval = math.sqrt(2.0 * blocking_seconds * mtbf)
    goodput = 1.0 - blocking_seconds / interval - (interval / 2.0 + async_seconds + restart_seconds) / mtbf
    return interval, goodput


CHECKPOINT_BYTES_PER_PARAM = 4 + 4 + 4  # fp32 master weights, Adam's first and second moments


def storage_bandwidth_needed(params, gpus, per_gpu_mtbf_hours, restart_seconds, max_overhead):
    mtbf = per_gpu_mtbf_hours * HOUR / gpus
    left = max_overhead - restart_seconds / mtbf  # what the saves may cost, sqrt(2 delta / M)
    if left <= 0:
        raise ValueError(f"no bandwidth can keep the overhead within {max_overhead}: the restarts alone cost "
                         f"{restart_seconds / mtbf:.4f} (a {restart_seconds} s restart every {mtbf:.0f} s)")
    delta = left * left * mtbf / 2.0  # the longest save that fits
    return params * CHECKPOINT_BYTES_PER_PARAM / delta


def tier_plan(cluster, target_goodput, write_budget):
    rates = [c["per_gpu_hour"] * cluster["gpus"] / HOUR for c in cluster["causes"]]
    mtbf = 1.0 / sum(rates)
    host_lost = sum(r for r, c in zip(rates, cluster["causes"]) if c["host_lost"]) * mtbf  # their share
    racks = sum(r for r, c in zip(rates, cluster["causes"]) if c.get("peers_lost")) * mtbf  # every copy lost
    hosts = max(1, cluster["gpus"] // cluster["gpus_per_host"])
    write = cluster["state_bytes"] / min(cluster["storage_bandwidth"], hosts * cluster["host_bandwidth"])
    peer = cluster["state_bytes"] / hosts / cluster["peer_bandwidth"]
    copy = cluster["local_copy"]
    # The budget sets the shortest persistent interval; a persistent save blocks for the copy alone.
    persistent = max(cluster["state_bytes"] / write_budget, math.sqrt(2.0 * copy * mtbf))

    def overhead(local, replicas):
        """First-order: the time saves block, and per failure the work redone, the read and the restart."""
        fallback = persistent / 2.0 + 2.0 * write  # work since the last persistent commit, the lag and the read
        blocking = copy / persistent
        if local is None:
            per_failure = fallback
        else:
            blocking += (copy + (replicas - 1) * peer) / local
            if replicas == 1:  # a lost host takes the only copy of its share: back to storage
                per_failure = host_lost * fallback + (1 - host_lost) * (local / 2.0 + copy)
            else:  # a lost host's share read from a peer, the others' from their own memory; a rack: storage
                per_failure = (racks * fallback + (host_lost - racks) * (local / 2.0 + peer)
                               + (1 - host_lost) * (local / 2.0 + copy))
        return blocking + (per_failure + cluster["restart"]) / mtbf

    options = [(None, 1)] + [(math.sqrt(2.0 * (copy + (r - 1) * peer) * mtbf), r) for r in range(1, 5)]
    local, replicas = min(options, key=lambda o: overhead(*o))
    return {"persistent_interval": persistent, "local_interval": local, "replicas": replicas}
