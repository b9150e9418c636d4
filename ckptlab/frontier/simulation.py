"""A synchronous training job on thousands of accelerators over days, simulated with SimPy: failures
drawn per cause from stated rates (or replayed from a trace), planned interruptions, periodic saves
to a local and a persistent tier, restarts that replay the work since the newest restorable step.

SimPy drives the job's life (:func:`simulate`: a job process, an interruption process that
interrupts it, restarts interrupted in turn). Between two interruptions the job's schedule is fixed,
so a :class:`Segment` works out in closed steps where an interruption found it (what it had
trained, what each tier had committed) instead of an event per save: a 54-day run of 16,384 GPUs is
about a thousand events, a few milliseconds.

The job (times in seconds, bytes, bytes per second):
- a failure of any cause stops it (synchronous training); a cause whose ``host_lost`` is true takes
  its host's memory and disks with it (the host is drained and replaced), and so that host's local
  checkpoints, unless ``replicas`` >= 2 keeps a copy of each host's local checkpoint on a peer (as
  Orbax's emergency manager keeps one per replica slice); a cause whose ``peers_lost`` is true (a
  rack's power) takes the peers' copies too: only the persistent tier is left;
- a save stops training for its blocking part: the copy from device to host memory (``local_copy``),
  plus, for a local save, the copy to each peer replica over ``peer_bandwidth``; a persistent save
  then writes the whole state to storage, which serves ``storage_bandwidth`` to every host together
  (each host at most ``host_bandwidth``). Asynchronous: training goes on during the write and the
  checkpoint is restorable once it has committed; the next persistent save waits for the write
  before it. Synchronous: training waits for the write;
- a restart costs ``restart`` (detection, rescheduling, start-up) plus reading the checkpoint back:
  from the host's own memory (``local_copy``), from a peer, or from storage; a failure during a
  restart starts it again; a planned interruption loses no work but pays a restart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from ckptlab.frontier.formulas import DAY, HOUR, save_seconds


@dataclass(frozen=True)
class Cause:
    """A cause of failure: its rate per GPU-hour, whether it takes its host's local data, and whether
    it takes its host's peers' too (``peers_lost``: a rack's power or switch, the copies a replica
    keeps on a neighbour gone with it)."""

    name: str
    per_gpu_hour: float
    host_lost: bool = True
    peers_lost: bool = False


@dataclass(frozen=True)
class Cluster:
    """The job and the machine it runs on (see the module's docstring for each cost)."""

    gpus: int
    causes: tuple[Cause, ...]
    state_bytes: float
    storage_bandwidth: float
    restart: float = 600.0
    gpus_per_host: int = 8
    host_bandwidth: float = math.inf
    peer_bandwidth: float = 25e9
    local_copy: float = 1.0
    planned_per_day: float = 0.0

    @property
    def hosts(self) -> int:
        return max(1, self.gpus // self.gpus_per_host)

    @property
    def mtbf(self) -> float:
        """The job's MTBF in seconds (unplanned failures only)."""
        return HOUR / (self.gpus * sum(c.per_gpu_hour for c in self.causes))

    @property
    def write_seconds(self) -> float:
        """Writing (or reading) the whole state to (from) storage, every host at once."""
        return save_seconds(self.state_bytes, self.storage_bandwidth, self.hosts, self.host_bandwidth)

    def as_dict(self) -> dict:
        """Plain data (a problem's argument): every field, the causes as dicts."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["causes"] = [{"name": c.name, "per_gpu_hour": c.per_gpu_hour, "host_lost": c.host_lost,
                          "peers_lost": c.peers_lost} for c in self.causes]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Cluster:
        """The cluster :meth:`as_dict` gave."""
        return cls(**{**data, "causes": tuple(Cause(**c) for c in data["causes"])})

    def peer_seconds(self) -> float:
        """Copying one host's share of the state to (or from) a peer."""
        return self.state_bytes / self.hosts / self.peer_bandwidth


@dataclass(frozen=True)
class Plan:
    """When and where the job saves: training seconds between persistent saves, between local saves
    (None: no local tier), copies of each host's local checkpoint, asynchronous persistent writes."""

    persistent_interval: float
    local_interval: float | None = None
    replicas: int = 1
    asynchronous: bool = True

    def __post_init__(self):
        if self.persistent_interval <= 0 or (self.local_interval is not None and self.local_interval <= 0):
            raise ValueError("intervals must be positive")
        if self.replicas < 1:
            raise ValueError("replicas must be at least 1")

    def local_blocking(self, cluster: Cluster) -> float:
        return cluster.local_copy + (self.replicas - 1) * cluster.peer_seconds()

    def persistent_blocking(self, cluster: Cluster) -> float:
        return cluster.local_copy + (0.0 if self.asynchronous else cluster.write_seconds)

    def persistent_lag(self, cluster: Cluster) -> float:
        return cluster.write_seconds if self.asynchronous else 0.0

    def average_write_bandwidth(self, cluster: Cluster) -> float:
        """The storage bandwidth this plan uses on average: the whole state every persistent interval."""
        return cluster.state_bytes / self.persistent_interval


@dataclass
class Trace:
    """Interruptions in wall-clock seconds from the start: each its time, its cause's index in the
    cluster's causes (-1: planned)."""

    times: np.ndarray
    causes: np.ndarray

    @property
    def unplanned(self) -> int:
        return int((self.causes >= 0).sum())

    @property
    def planned(self) -> int:
        return int((self.causes < 0).sum())


def draw_trace(cluster: Cluster, days: float, rng: np.random.Generator) -> Trace:
    """Interruptions over ``days`` drawn from the cluster's rates: the unplanned ones one Poisson
    process of the summed rate (every GPU, every cause), each cause drawn by its share of the rate;
    the planned ones a Poisson process of their own. Sampled whole, not GPU by GPU."""
    horizon = days * DAY
    rates = np.array([c.per_gpu_hour for c in cluster.causes]) * cluster.gpus / HOUR
    n = rng.poisson(rates.sum() * horizon)
    causes = rng.choice(len(rates), size=n, p=rates / rates.sum())
    planned = rng.poisson(cluster.planned_per_day * days)
    times = np.concatenate([rng.uniform(0, horizon, n), rng.uniform(0, horizon, planned)])
    order = np.argsort(times, kind="stable")
    return Trace(times[order], np.concatenate([causes, -np.ones(planned, dtype=int)])[order])


@dataclass
class Outcome:
    """What one simulated run did with its wall-clock time."""

    wall: float
    progress: float  # training kept at the end (seconds of training)
    interruptions: int = 0
    planned: int = 0
    restores: dict = field(default_factory=lambda: {"local": 0, "peer": 0, "persistent": 0, "start": 0})
    lost: float = 0.0  # training redone after failures
    blocked: float = 0.0  # saves' blocking parts, and waits for a persistent write
    restarting: float = 0.0

    @property
    def goodput(self) -> float:
        return self.progress / self.wall


class Segment:
    """The job between two interruptions: from wall time ``start`` and training ``progress``, its
    saves at fixed training times; :meth:`at` says where an interruption at wall time ``t`` finds it."""

    def __init__(self, cluster: Cluster, plan: Plan, start: float, progress: float):
        self.cluster, self.plan, self.start, self.progress0 = cluster, plan, start, progress

    def _saves(self):
        """Each save, in order, without end: (its training progress, the wall time training reached
        it, the wall time its blocking part starts (later where it waits for the previous persistent
        write), the wall time its blocking part ends, "local" or "persistent")."""
        plan, p0 = self.plan, self.progress0
        tau_p, tau_l = plan.persistent_interval, plan.local_interval
        b_p, b_l = plan.persistent_blocking(self.cluster), plan.local_blocking(self.cluster)
        lag = plan.persistent_lag(self.cluster)
        wall, p, k, j, write_end = self.start, p0, 1, 1, -math.inf
        while True:
            next_p = p0 + k * tau_p
            next_l = p0 + j * tau_l if tau_l is not None else math.inf
            point = min(next_p, next_l)
            reached = wall + (point - p)
            p = point
            if next_l <= next_p:  # (a local and a persistent save at one step: the local first)
                j += 1
                wall = reached + b_l
                yield point, reached, reached, wall, "local"
            else:
                k += 1
                begin = max(reached, write_end)
                wall = begin + b_p
                write_end = wall + lag
                yield point, reached, begin, wall, "persistent"

    def at(self, t: float) -> dict:
        """Where an interruption at wall time ``t`` finds the segment: ``progress`` (training done),
        ``local`` and ``persistent`` (the training progress of the newest checkpoint each tier had
        committed by then, or None), ``blocked`` (wall time spent in saves' blocking parts and in
        waits for a write)."""
        lag = self.plan.persistent_lag(self.cluster)
        wall, p, blocked = self.start, self.progress0, 0.0
        committed = {"local": None, "persistent": None}
        for point, reached, _begin, end, kind in self._saves():
            if reached >= t:  # training towards this save
                p += t - wall
                break
            p = point
            if end > t:  # waiting for a write, or in this save's blocking part: nothing of it committed
                blocked += t - reached
                break
            blocked += end - reached
            if kind == "local":
                committed["local"] = point
            elif end + lag <= t:
                committed["persistent"] = point
            wall = end
        return {"progress": p, "blocked": blocked, **committed}


class _Job:
    """The job's state across segments: the newest checkpoint of each tier it could restore."""

    def __init__(self, cluster: Cluster, plan: Plan, horizon: float):
        self.cluster, self.plan, self.horizon = cluster, plan, horizon
        self.local = self.persistent = None  # training progress of each tier's newest checkpoint
        self.outcome = Outcome(wall=horizon, progress=0.0)
        self.segment: Segment | None = None  # the segment under way, or None during a restart
        self.resume = 0.0  # during a restart: the progress it restores
        self.restart_began = 0.0

    def restore(self, cause: Cause) -> tuple[float, float, str]:
        """After a failure: (the progress to restore, the read's time, the tier it comes from)."""
        c, plan, host_lost = self.cluster, self.plan, cause.host_lost
        if cause.peers_lost or (host_lost and plan.replicas < 2):
            self.local = None  # a host's local checkpoints are gone, every copy of them: the tier is incomplete
        local_ok = self.local is not None and (self.persistent is None or self.local >= self.persistent)
        if local_ok:
            return self.local, (c.peer_seconds() if host_lost else c.local_copy), ("peer" if host_lost else "local")
        if self.persistent is not None:
            return self.persistent, c.write_seconds, "persistent"
        return 0.0, 0.0, "start"

    def run(self, env: simpy.Environment):
        """The job process: segments of training, each ended by an interruption, each followed by a
        restart that an interruption may start again."""
        progress, out = 0.0, self.outcome
        while True:
            segment = self.segment = Segment(self.cluster, self.plan, env.now, progress)
            try:
                yield env.timeout(self.horizon - env.now + 1.0)
            except simpy.Interrupt as interrupt:
                found = segment.at(env.now)
                out.blocked += found["blocked"]
                self.local = found["local"] if found["local"] is not None else self.local
                self.persistent = found["persistent"] if found["persistent"] is not None else self.persistent
                progress = yield from self._restart(env, interrupt.cause, found["progress"])

    def _restart(self, env: simpy.Environment, cause, progress: float):
        """Restarts until one completes; the progress training resumes from."""
        out = self.outcome
        while True:
            planned = cause is None
            if planned:  # a planned interruption: the job saves to storage first, loses nothing, restarts
                target, read, tier = progress, 2 * self.cluster.write_seconds, "persistent"
                self.persistent = target
            else:
                target, read, tier = self.restore(cause)
            out.lost += progress - target
            self.segment, self.resume = None, target
            began = self.restart_began = env.now
            try:
                yield env.timeout(self.cluster.restart + read)
            except simpy.Interrupt as again:
                out.restarting += env.now - began
                progress, cause = target, again.cause
                continue
            out.restarting += env.now - began
            out.restores[tier] += 0 if planned else 1
            return target


def _interruptions(env: simpy.Environment, job: simpy.Process, trace: Trace, causes, outcome: Outcome):
    for when, cause in zip(trace.times.tolist(), trace.causes.tolist()):
        yield env.timeout(when - env.now)
        if cause < 0:
            outcome.planned += 1
        else:
            outcome.interruptions += 1
        job.interrupt(None if cause < 0 else causes[cause])


def simulate(cluster: Cluster, plan: Plan, days: float, seed: int = 0, trace: Trace | None = None) -> Outcome:
    """One run of ``days``: interruptions drawn from the cluster's rates with ``seed`` (or replayed
    from ``trace``), the job checkpointing as ``plan`` says. Reproducible: one seed, one outcome."""
    horizon = days * DAY
    trace = trace if trace is not None else draw_trace(cluster, days, np.random.default_rng(seed))
    keep = trace.times < horizon
    trace = Trace(trace.times[keep], trace.causes[keep])
    env = simpy.Environment()
    job = _Job(cluster, plan, horizon)
    process = env.process(job.run(env))
    env.process(_interruptions(env, process, trace, cluster.causes, job.outcome))
    env.run(until=horizon)
    return _ended(job, process, horizon)


def _ended(job: _Job, process, horizon: float) -> Outcome:
    """The outcome at the horizon: the segment under way there read where it stands (or the
    restart under way: its time spent, the progress it restores)."""
    out = job.outcome
    if job.segment is not None:
        found = job.segment.at(horizon)
        out.progress, out.blocked = found["progress"], out.blocked + found["blocked"]
    else:
        out.progress = job.resume
        out.restarting += horizon - job.restart_began
    return out
