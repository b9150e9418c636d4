"""Closed forms for checkpointing a large synchronous job: its MTBF from per-component rates, the
interval that balances saving against lost work (Young 1974; Daly 2006), the goodput an interval
gives, and the storage bandwidth a goodput target needs.

The model behind every formula here (and behind :mod:`ckptlab.frontier.simulation`, which checks
them): failures arrive as a Poisson process (independent components, constant rates: no wear-out,
no burn-in); a failure anywhere stops the whole job (synchronous training); the job then pays a
restart (detection, rescheduling, start-up, reading the checkpoint back) and redoes the work since the
newest checkpoint it can restore. Times are seconds; bandwidths bytes per second.

- ``save_cost`` (δ): the time a save stops training (its *blocking* part). An asynchronous save's
  write continues while training runs; it costs no training time, but its checkpoint can be restored
  only once the write has committed (``commit_lag``).
- ``restart`` (R): from the failure to training again, the checkpoint's read included.
- ``mtbf`` (M): the *job's* mean time between failures: 1 / (the sum of every component's rate).
"""

from __future__ import annotations

import math

HOUR = 3600.0
DAY = 24 * HOUR

# Bytes per parameter of a mixed-precision Adam training state: bf16 weights (2) and gradients (2),
# fp32 master weights (4) and Adam's two moments (4 + 4). A checkpoint keeps what a restart needs:
# the master weights and the moments (12), often the bf16 weights too (14); never the gradients.
ADAM_MIXED_PRECISION_BYTES = {"bf16 weights": 2, "bf16 gradients": 2, "fp32 master weights": 4,
                              "Adam first moment": 4, "Adam second moment": 4}
TRAINING_STATE_BYTES_PER_PARAM = sum(ADAM_MIXED_PRECISION_BYTES.values())  # 16
CHECKPOINT_BYTES_PER_PARAM = 12  # master weights and moments: what a restart cannot do without


def job_mtbf(component_mtbf: float, components: int) -> float:
    """The job's MTBF when any one of ``components`` (each failing on its own, MTBF
    ``component_mtbf``) stops it: rates add, so the MTBF divides by the count."""
    if component_mtbf <= 0 or components < 1:
        raise ValueError("component_mtbf must be positive and components at least 1")
    return component_mtbf / components


def job_mtbf_from_rates(rates_per_gpu_hour: dict, gpus: int) -> float:
    """The job's MTBF in seconds from per-GPU failure rates (failures per GPU-hour), one per cause."""
    total = sum(float(r) for r in rates_per_gpu_hour.values()) * gpus
    if total <= 0:
        raise ValueError("at least one failure rate must be positive")
    return HOUR / total


def young_interval(save_cost: float, mtbf: float) -> float:
    """Young's (1974) first-order optimum: the training time between two saves, sqrt(2 δ M)."""
    return math.sqrt(2.0 * save_cost * mtbf)


def daly_interval(save_cost: float, mtbf: float) -> float:
    """Daly's (2006) higher-order optimum (training time between saves), for exponential failures."""
    if save_cost >= 2.0 * mtbf:
        return mtbf
    x = save_cost / (2.0 * mtbf)
    return math.sqrt(2.0 * save_cost * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - save_cost


def goodput(interval: float, save_cost: float, restart: float, mtbf: float) -> float:
    """The expected fraction of wall time that is kept training, exactly, for saves that block
    (Daly 2006's expected time per segment): a segment of ``interval`` training plus ``save_cost``
    of saving is retried from its start after every failure, each retry after ``restart``, and a
    failure during a restart starts the restart again. ``interval / (M e^{R/M} (e^{(τ+δ)/M} - 1))``."""
    if interval <= 0:
        raise ValueError("the interval must be positive")
    return interval / (mtbf * math.exp(restart / mtbf) * math.expm1((interval + save_cost) / mtbf))


def goodput_first_order(interval: float, save_cost: float, restart: float, mtbf: float,
                        commit_lag: float = 0.0) -> float:
    """The first-order goodput, for saves whose blocking part is ``save_cost`` and whose checkpoint
    commits ``commit_lag`` after that (an asynchronous write): each interval loses the save's
    blocking time; each failure, on average, half an interval of work, the lag, and the restart.
    ``1 - δ/τ - (τ/2 + lag + R)/M``; good while τ, lag and R are small beside M."""
    return 1.0 - save_cost / interval - (interval / 2.0 + commit_lag + restart) / mtbf


def best_goodput(save_cost: float, restart: float, mtbf: float) -> tuple[float, float]:
    """``(interval, goodput)`` at the exact optimum of :func:`goodput` (a golden-section search
    around Daly's interval: the curve has one maximum)."""
    lo, hi = max(1e-9, daly_interval(save_cost, mtbf) / 8), daly_interval(save_cost, mtbf) * 8
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if goodput(a, save_cost, restart, mtbf) < goodput(b, save_cost, restart, mtbf):
            lo = a
        else:
            hi = b
    tau = (lo + hi) / 2
    return tau, goodput(tau, save_cost, restart, mtbf)


def save_seconds(state_bytes: float, storage_bandwidth: float, hosts: int = 1,
                 host_bandwidth: float = math.inf) -> float:
    """Writing (or reading) ``state_bytes`` spread over ``hosts``, each at most ``host_bandwidth``,
    into a store that serves ``storage_bandwidth`` to all of them together: the slower side wins."""
    return state_bytes / min(storage_bandwidth, hosts * host_bandwidth)


def bandwidth_for_goodput(state_bytes: float, restart: float, mtbf: float, target: float) -> float:
    """The least storage bandwidth at which saving ``state_bytes`` synchronously, at the best
    interval, reaches goodput ``target`` (exact model, :func:`best_goodput`); ``math.inf`` where no
    bandwidth can (the restarts alone cost too much). Bisection on the save's cost, which the best
    goodput falls with."""
    if best_goodput(1e-9 * mtbf, restart, mtbf)[1] < target:
        return math.inf
    lo, hi = 1e-9 * mtbf, mtbf  # save costs: lo reaches the target, hi does not
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if best_goodput(mid, restart, mtbf)[1] >= target:
            lo = mid
        else:
            hi = mid
    return state_bytes / lo
