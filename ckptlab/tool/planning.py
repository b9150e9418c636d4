"""Before a slow load or an OOM: what restoring a checkpoint onto a layout will read and hold, per
host, from the checkpoint's records alone; and the same restore run for real beside it.

    from ckptlab.tool.planning import plan_restore
    plan = plan_restore("ckpt", mesh={"data": 2, "model": 8}, specs={"*embed*": (None, "model")}, hosts=2)
    print(plan.text())                      # python -m ckptlab plan ckpt --mesh data=2,model=8 ...

(The same restore run for real: :mod:`ckptlab.tool.measuring`.) ``ckpt`` may be in object storage
(``s3://bucket/path``: :mod:`ckptlab.tool.objectstore`): the plan reads its records alone.

**The model, and which bound each figure is.** The target layout gives each device its index
domain (asked of JAX's own ``NamedSharding``); the checkpoint's chunk grid and each chunk's bytes
on disk come from :mod:`ckptlab.tool.inspection`. A chunk is read whole. Per host (its devices are the
mesh's, row-major, in contiguous blocks of ``devices / hosts``, as the processes of one job hold
them):

- ``floor``: one read of every chunk any of the host's devices overlaps, the least a restore
  reads (Lesson 3 measures Orbax meeting it on aligned and replicated targets);
- ``ceiling``: every device reading its own chunks alone, no read shared (Lesson 3: a misaligned
  target lands between the two, up to a few times the floor, varying from run to run);
- ``needed``: the bytes of the distinct pieces the host's devices hold (replicas once), as stored:
  each chunk read, its stored bytes pro rata to the part of it the host holds (so a host that holds
  every chunk it reads whole needs its floor exactly, whatever each chunk compressed to);
- ``held``: what the host's devices hold, every replica counted: the peak host memory's lower
  bound where devices are host memory (CPU devices); the restore keeps more than the arrays while
  it runs, and how much more is measured (:func:`measure_restore`), not modelled here.

Reads exclude the checkpoint's metadata files (a few KiB to a few MiB: the B+tree, ``_METADATA``).
**Pre-sharding** (Lesson 4, MaxText's re-sharding of its checkpoints for a 64-way FSDP load):
when the floor is above what is needed, saving the checkpoint once in the target layout (one chunk
per target shard, the chunk shape given) makes each host read exactly what it needs. It is
suggested for an array only where that lowers some host's reads by a real margin (a tenth of its
floor and 4 KiB), or its ceiling by as much where that is 1.5x its floor or more (devices reading
chunks they share, on one host as on many), with a pre-sharded copy's floor and ceiling per host.
Leaves replicated by fallback (no spec asked, none saved that fits the mesh) are counted and named,
with what they hold and read. Leaves that are not arrays are listed, neither planned nor restored.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

from ckptlab import layout
from ckptlab.tool import objectstore
from ckptlab.tool.inspection import ArrayInfo, inspect_checkpoint, spec_text

# Pre-sharding is suggested where it saves some host at least this share of an array's floor, and
# this many bytes: below that, the gain is noise in what the chunks compressed to, not the layout.
PRESHARD_MARGIN, PRESHARD_MIN_BYTES = 0.1, 4096
# A ceiling this many times the floor is a restore whose reads can land far above the least it needs
# (Lesson 3: a misaligned target read up to a few times its floor), on one host as on many.
CEILING_RATIO = 1.5
SPEC_HELP = ("a spec is the mesh axis per dimension, comma-separated: 'model' or 'None,model' or 'data+model,None' "
             "(one dimension over two axes); '' replicates")


def parse_mesh(text: str) -> dict:
    """``data=2,model=8`` -> ``{"data": 2, "model": 8}``: the course's one mesh grammar, the explorer's too
    (:func:`ckptlab.layout.parse_mesh`)."""
    return layout.parse_mesh(text)


def parse_spec(text: str) -> tuple:
    """``None,model`` -> ``(None, "model")``; ``data+model`` -> ``(("data", "model"),)``; ``''`` -> ``()``."""
    out = []
    for part in (p.strip() for p in text.split(",")) if text.strip() else ():
        if part in ("None", "none", "-", ""):
            out.append(None)
        elif "+" in part:
            out.append(tuple(a.strip() for a in part.split("+")))
        else:
            out.append(part)
    return tuple(out)


def parse_specs(items) -> dict:
    """``["*embed*=None,model", "params/w=model"]`` -> ``{pattern: spec}`` (first match wins)."""
    specs = {}
    for item in items or ():
        pattern, sep, spec = item.partition("=")
        if not sep or not pattern:
            raise ValueError(f"spec {item!r}: write PATTERN=SPEC, e.g. 'params/*/kernel=None,model'; {SPEC_HELP}")
        specs[pattern.strip()] = parse_spec(spec)
    return specs


def read_rules(path) -> list[str]:
    """A rules file's ``PATTERN=SPEC`` lines (blank lines and ``#`` comments skipped), for
    :func:`parse_specs`: the specs of a model's sharding rules, kept beside the checkpoint."""
    from pathlib import Path

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"rules file {path}: {exc.strerror or exc}") from exc
    return [line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip()]


@dataclass
class ArrayPlan:
    path: str
    spec: tuple
    why: str  # "asked", "as saved", or why it is replicated
    floor: list  # bytes per host
    ceiling: list
    needed: list
    held: list
    presharded_chunk: tuple | None  # the chunk shape that would make floor == needed, where that is worth it
    keys: tuple = ()  # the leaf's keys (its path as printed is ``path``)
    # per host, the ceiling of a copy saved in the target layout (each device reads its own shard's
    # one chunk: what its devices hold, at the stored bytes per element)
    presharded_ceiling: list = field(default_factory=list)


@dataclass
class Plan:
    path: str
    mesh: dict
    hosts: int
    arrays: list = field(default_factory=list)
    metadata_bytes: int = 0
    not_arrays: list = field(default_factory=list)  # "path (kind)" of the leaves that are not arrays
    folder: str = field(default="", repr=False)  # the pytree folder read (an object store's: its records' copy)

    def total(self, what: str) -> list:
        return [sum(getattr(a, what)[h] for a in self.arrays) for h in range(self.hosts)]

    def presharded_reads(self) -> list:
        """Per host, the floor once every array the plan would pre-shard is saved in its target layout."""
        return [sum((a.needed if a.presharded_chunk else a.floor)[h] for a in self.arrays) for h in range(self.hosts)]

    def presharded_ceiling(self) -> list:
        """Per host, the ceiling once every array the plan would pre-shard is saved in its target layout."""
        return [sum((a.presharded_ceiling if a.presharded_chunk else a.ceiling)[h] for a in self.arrays)
                for h in range(self.hosts)]

    def fallback(self) -> list:
        """The arrays replicated for want of a spec: none asked, and none saved that fits the mesh."""
        return [a for a in self.arrays if a.why.startswith("replicated")]

    def as_dict(self) -> dict:
        return {"path": self.path, "mesh": self.mesh, "hosts": self.hosts,
                "per_host": {k: self.total(k) for k in ("floor", "ceiling", "needed", "held")},
                "presharded_floor": self.presharded_reads(), "presharded_ceiling": self.presharded_ceiling(),
                "replicated_by_fallback": [a.path for a in self.fallback()], "metadata_bytes": self.metadata_bytes,
                "arrays": [a.__dict__ for a in self.arrays], "not_arrays": self.not_arrays}

    def text(self, top: int = 5) -> str:
        from ckptlab.tool.inspection import human

        floor, ceiling = self.total("floor"), self.total("ceiling")
        lines = [f"{self.path} onto a mesh {' x '.join(f'{k} {v}' for k, v in self.mesh.items())}, "
                 f"{self.hosts} host(s) of {math.prod(self.mesh.values()) // self.hosts} device(s)"]
        for h in range(self.hosts):
            lines.append(f"host {h}: reads {human(floor[h])} (floor: one read per chunk) to "
                         f"{human(ceiling[h])} (ceiling: no read shared); needs {human(self.total('needed')[h])}; "
                         f"its devices hold {human(self.total('held')[h])} (the peak's lower bound on CPU devices)")
        worst = sorted(self.arrays, key=lambda a: -max(a.floor))[:top]
        lines.append(f"the arrays that dominate (floor per host{'' if len(self.arrays) <= top else f'; {len(worst)} of {len(self.arrays)}'}):")
        for a in worst:
            lines.append(f"  {a.path}: {', '.join(human(x) for x in a.floor)}; spec {a.spec} ({a.why})")
        wide = [(h, c / f) for h, (f, c) in enumerate(zip(floor, ceiling))
                if f and c >= CEILING_RATIO * f and c - f >= PRESHARD_MIN_BYTES]
        if wide:  # one host or many: the reads can land anywhere between the two
            lines.append("the ceiling is well above the floor (" + ", ".join(f"{r:.1f}x on host {h}" for h, r in wide)
                         + "): a restore's reads land between the two, the higher the more its devices each read "
                         "chunks they share (Lesson 3 measured a misaligned target at up to a few times its floor)")
        pre = [a for a in self.arrays if a.presharded_chunk]
        if pre:
            after_floor, after_ceiling = self.presharded_reads(), self.presharded_ceiling()
            lines.append(f"pre-sharding {len(pre)} array(s) (saved once in the target layout, one chunk per target "
                         "shard) would make " + "; ".join(
                             f"host {h} read {human(after_floor[h])} (floor) to {human(after_ceiling[h])} (ceiling) "
                             f"instead of {human(floor[h])} to {human(ceiling[h])}" for h in range(self.hosts))
                         + (f" (the {top} that gain most below; --json lists each)" if len(pre) > top else ""))
            for a in sorted(pre, key=_gain)[:top]:
                lines.append(f"  {a.path}: chunk {a.presharded_chunk}")
            still = [(h, c / f) for h, (f, c) in enumerate(zip(after_floor, after_ceiling))
                     if f and c >= CEILING_RATIO * f and c - f >= PRESHARD_MIN_BYTES]
            if still:
                lines.append("after it, the ceiling stays " + ", ".join(f"{r:.1f}x the floor on host {h}" for h, r in still)
                             + ": replicas, each device reading its own copy"
                             + (" (the arrays replicated by fallback, below, among them)" if self.fallback() else ""))
        elif wide:
            lines.append("pre-sharding would not lower the ceiling: the devices reading the same chunks hold the same "
                         "pieces (replicas, each read alone at the ceiling)")
        else:
            lines.append(f"the saved chunks already suit this layout: pre-sharding would lower no host's reads of an "
                         f"array by {PRESHARD_MARGIN:.0%} of its floor (and {human(PRESHARD_MIN_BYTES)}) or more")
        fallback = self.fallback()
        if fallback:  # a cost the layout did not ask for: every device holds (and may read) a whole copy
            held = [sum(a.held[h] for a in fallback) for h in range(self.hosts)]
            reads = [sum(a.ceiling[h] for a in fallback) for h in range(self.hosts)]
            per_host = math.prod(self.mesh.values()) // self.hosts
            lines.append(f"{len(fallback)} array(s) replicated by fallback (no spec asked, none saved that fits this "
                         f"mesh), {human(held[0] // per_host)} of values: each device holds a whole copy; per host, "
                         f"{', '.join(human(x) for x in held)} held and up to {', '.join(human(x) for x in reads)} read "
                         "(ceiling); give them a spec (--spec PATTERN=SPEC) to shard them:")
            for a in fallback:
                lines.append(f"  {a.path} ({human(a.held[0] // per_host)}): {a.why.split(': ', 1)[1]}")
        lines.append(f"not counted: the metadata files, {human(self.metadata_bytes)}")
        if self.not_arrays:
            lines.append(f"not arrays, not planned: {', '.join(self.not_arrays)}")
        return "\n".join(lines)


def _gain(a: ArrayPlan) -> float:
    """What pre-sharding ``a`` saves its host that gains most, on the floor or the ceiling (negated: a sort key)."""
    return -max(max(f - n, c - p) for f, n, c, p in zip(a.floor, a.needed, a.ceiling, a.presharded_ceiling or a.ceiling))


def _spec_for(array: ArrayInfo, mesh: dict, specs: dict) -> tuple[tuple, str]:
    for pattern, spec in specs.items():
        if fnmatch.fnmatchcase(array.path, pattern):
            _check_spec(array, spec, mesh, pattern)
            return spec, "asked"
    saved = array.spec
    if saved is not None and array.mesh is not None:
        lacking = sorted({a for e in saved if e is not None for a in _axes(e)} - set(mesh))
        if lacking:
            return (), (f"replicated: no spec asked, and the saved {spec_text(saved)} names "
                        f"{', '.join(map(repr, lacking))}, which this mesh lacks")
        for dim, (e, n) in enumerate(zip(saved, array.shape)):
            ways = math.prod(mesh[a] for a in _axes(e))
            if n % ways:
                return (), (f"replicated: no spec asked, and the saved {spec_text(saved)} would split dimension "
                            f"{dim} ({n}) into {ways} on this mesh")
        if len(saved) <= len(array.shape):
            return tuple(saved), "as saved"
        return (), f"replicated: no spec asked, and the saved {spec_text(saved)} does not fit this mesh"
    return (), f"replicated: no spec asked, and none saved (it was saved from {array.saved_on or 'one device'})"


def _axes(entry) -> tuple:
    """A spec entry's mesh axes: ``None`` -> (), ``"x"`` -> ("x",), ``("x", "y")`` -> ("x", "y")."""
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def _check_spec(array: ArrayInfo, spec: tuple, mesh: dict, pattern: str) -> None:
    """Refuse a spec asked by ``pattern`` that cannot place ``array`` on ``mesh``, naming the leaf, and
    how to give it another (a catch-all such as ``*=x`` meets every leaf, scalars and all)."""
    asked = f"the spec {spec_text(spec)} of the pattern {pattern!r}"
    fix = (f"give {array.path} a more specific pattern before {pattern!r} (the first match wins), e.g. "
           f"--spec '{array.path}=' to replicate it")
    if len(spec) > len(array.shape):
        raise ValueError(f"{array.path} {array.shape}: {asked} has {len(spec)} entries, more than its "
                         f"{len(array.shape)} dimension(s); {fix}")
    unknown = [a for e in spec for a in _axes(e) if a not in mesh]
    if unknown:
        raise ValueError(f"{array.path}: {asked} names the axis {unknown[0]!r}, which the mesh has not: its axes are "
                         f"{', '.join(f'{a!r} ({n})' for a, n in mesh.items())}; name one of them, 'None' to keep a "
                         "dimension whole, or '' to replicate the leaf")
    dims: dict = {}
    for dim, entry in enumerate(spec):
        for a in _axes(entry):
            if a in dims:
                where = f"dimensions {dims[a]} and {dim}" if dims[a] != dim else f"dimension {dim} twice"
                raise ValueError(f"{array.path}: {asked} names the axis {a!r} twice ({where}): a mesh axis splits "
                                 "at most one dimension, once; name it once (two axes on one dimension: 'x+y')")
            dims[a] = dim
    for dim, (entry, n) in enumerate(zip(spec, array.shape)):
        axes = _axes(entry)
        ways = math.prod(mesh[a] for a in axes)
        if n % ways:
            raise ValueError(f"{array.path} {array.shape}: dimension {dim} ({n}) does not split into {ways} "
                             f"({'+'.join(axes)}), as {asked} asks; {fix}")


def plan_restore(path, mesh: dict, specs: dict | None = None, hosts: int = 1, step: int | None = None,
                 progress=None, max_chunks: int | None = None, max_bytes: int | None = None, restoring=False) -> Plan:
    """What restoring ``path`` onto ``mesh`` (its axes and sizes) with ``specs`` ({fnmatch pattern on
    the leaf's path: spec}; others as saved where that fits, else replicated) reads and holds per
    host of ``hosts``. Needs JAX with at least the mesh's number of devices (``setup_devices``).
    ``progress``, if given, is called with (arrays done, arrays in all, path) before each array. A checkpoint
    declaring far more chunks than it stores (``restoring``: or bytes) is refused (:mod:`ckptlab.tool.untrusted`)."""
    from collections import Counter
    from functools import cache

    from ckptlab.layout import iter_chunks_overlapped, real_index_domains
    from ckptlab.tool.untrusted import check_bounded

    mesh = {str(k): int(v) for k, v in mesh.items()}
    index_domains = cache(lambda shape, spec: real_index_domains(shape, mesh, spec))  # leaves alike share theirs
    devices = math.prod(mesh.values())
    if hosts < 1 or devices % hosts:
        fewer = ", ".join(str(n) for n in range(1, devices) if devices % n == 0)
        raise ValueError(f"{devices} devices cannot be split over {hosts} hosts evenly: pass --hosts "
                         f"{' or '.join(filter(None, (fewer, str(devices))))} (a divisor of the mesh's {devices} "
                         "devices: each host holds as many)")
    per_host = devices // hosts
    info = inspect_checkpoint(path, step)
    check_bounded(info, max_chunks, max_bytes, values=restoring)  # before a chunk grid is walked
    plan = Plan(objectstore.shown(str(info.path)), mesh, hosts, not_arrays=[f"{o.path} ({o.kind})" for o in info.others],
                folder=str(info.path))
    files = sum(p.stat().st_size for p in info.path.rglob("*") if p.is_file())  # an object store's: its records
    plan.metadata_bytes = (max(0, files - info.stored_bytes) if objectstore.copy_of(info.path) is None
                           else files + info.tree_bytes)
    for done, array in enumerate(info.arrays):
        if progress is not None:
            progress(done, len(info.arrays), array.path)
        spec, why = _spec_for(array, mesh, specs or {})
        itemsize = array.nbytes // max(1, math.prod(array.shape))
        if not array.shape:
            domains = {d: () for d in range(devices)}
        else:
            try:
                domains = index_domains(array.shape, spec)
            except Exception as exc:
                raise ValueError(f"{array.path}: spec {spec} on mesh {mesh}: {type(exc).__name__}: {exc}") from exc
        chunk = tuple(array.chunk_shape or array.shape)
        size = {pos: n for pos, n in array.chunk_sizes.items()}
        default = array.stored_bytes / max(1, array.chunks)
        floor, ceiling, needed, held = [], [], [], []
        for h in range(hosts):
            mine = [d for d in range(h * per_host, (h + 1) * per_host)]
            reads = [iter_chunks_overlapped(domains[d], chunk) if array.shape else [()] for d in mine]
            counts = Counter(c for r in reads for c in r)  # each chunk the host reads, and by how many devices
            floor.append(sum(size.get(c, default) for c in counts))
            ceiling.append(sum(size.get(c, default) * k for c, k in counts.items()))
            share = _shares({tuple(map(tuple, domains[d])) for d in mine}, chunk, array.shape)
            needed.append(sum(size.get(c, default) * part for c, part in share.items()))
            held.append(sum(math.prod(b - a for a, b in domains[d]) for d in mine) * itemsize)
        target_shard = tuple(b - a for a, b in domains[0]) if array.shape else ()
        # saved in the target layout, each device reads its own shard's one chunk: its bytes pro rata
        per_element = array.stored_bytes / max(1, math.prod(array.shape))
        after = [x / max(1, itemsize) * per_element for x in held]
        worth = any(f - n >= max(PRESHARD_MARGIN * f, PRESHARD_MIN_BYTES) for f, n in zip(floor, needed)) or any(
            c >= CEILING_RATIO * f and c - p >= max(PRESHARD_MARGIN * c, PRESHARD_MIN_BYTES)
            for f, c, p in zip(floor, ceiling, after))
        presharded = target_shard if worth and target_shard != chunk else None
        plan.arrays.append(ArrayPlan(array.path, spec, why, floor, ceiling, needed, held, presharded, array.keys,
                                     after))
    if progress is not None:
        progress(len(info.arrays), len(info.arrays), "")
    return plan


def _shares(pieces, chunk: tuple, shape: tuple) -> dict:
    """{chunk grid position: the part of that chunk (0 to 1) the distinct ``pieces`` (index domains
    of one host's devices, disjoint) cover}: what a host needs of each chunk it reads."""
    from ckptlab.layout import iter_chunks_overlapped

    if not shape:
        return {(): 1.0}
    covered: dict = {}
    for piece in pieces:
        for c in iter_chunks_overlapped(piece, chunk):
            box = [(i * k, min((i + 1) * k, n)) for i, k, n in zip(c, chunk, shape)]
            inside = math.prod(max(0, min(b, q) - max(a, p)) for (a, b), (p, q) in zip(box, piece))
            covered[c] = covered.get(c, 0.0) + inside / max(1, math.prod(b - a for a, b in box))
    return {c: min(1.0, part) for c, part in covered.items()}


__all__ = ["Plan", "plan_restore", "parse_mesh", "parse_spec", "parse_specs"]
