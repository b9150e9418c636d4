"""Benchmark: ``python -m ckptlab inspect`` and ``plan`` as the checkpoint grows in leaves.

Saves MaxText-like checkpoints with Orbax (OCDBT on; ``params/params/decoder/layers_<i>/...``,
ten small float32 arrays a layer, each split in two chunks over a 2-device mesh) of 100, 1,000
and 10,000 leaves, then times ``inspect_checkpoint`` and ``plan_restore`` (a 2 x 2 mesh, two hosts)
on each, in this process after a warm-up, and prints each time and its ratio to the one of ten
times fewer leaves. The goal: ten times the leaves within 15 times the time (a cost that follows
the checkpoint; a scan of every key per leaf makes it 100 times).

Run: ``make bench`` (or ``python bench/bench_inspector.py --leaves 100,1000 --repeat 3``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

GOAL = 15.0  # the most time 10x the leaves may take, as a ratio
PER_LAYER = ("mlp/wi_0/kernel", "mlp/wi_1/kernel", "mlp/wo/kernel", "self_attention/query/kernel",
             "self_attention/key/kernel", "self_attention/value/kernel", "self_attention/out/kernel",
             "pre_self_attention_layer_norm/scale", "post_self_attention_layer_norm/scale", "mlp/wo/bias")


def save(path: Path, leaves: int) -> None:
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from ckptlab.layout import course_mesh

    sharding = NamedSharding(course_mesh({"x": 2}), P("x"))
    value = jax.device_put(np.arange(8 * 128, dtype=np.float32).reshape(8, 128), sharding)  # 2 chunks of 2 KiB
    layers: dict = {}
    for i in range(leaves):
        node = layers.setdefault(f"layers_{i // len(PER_LAYER)}", {})
        *parents, name = PER_LAYER[i % len(PER_LAYER)].split("/")
        for part in parents:
            node = node.setdefault(part, {})
        node[name] = value + i  # a value of its own
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(path, {"params": {"params": {"decoder": layers}}})
    checkpointer.wait_until_finished()


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leaves", default="100,1000,10000", help="checkpoint sizes, in leaves, comma-separated")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    from ckptlab import setup_devices

    setup_devices(16)
    from absl import logging

    from ckptlab.tool.inspection import inspect_checkpoint
    from ckptlab.tool.planning import plan_restore

    logging.set_verbosity(logging.ERROR)
    sizes = [int(n) for n in args.leaves.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-inspector-") as folder:
        measure(Path(folder), sizes, args.repeat, inspect_checkpoint, plan_restore)


def measure(root: Path, sizes: list, repeat: int, inspect_checkpoint, plan_restore) -> None:
    start = time.perf_counter()
    for n in sizes:
        save(root / str(n), n)
    print(f"saved {', '.join(f'{n:,}' for n in sizes)} leaves in {time.perf_counter() - start:.1f} s")
    mesh = {"data": 2, "model": 2}
    commands = {"inspect": lambda p: inspect_checkpoint(p),
                "plan": lambda p: plan_restore(p, mesh, {"*": (None, "model")}, hosts=2)}
    for fn in commands.values():
        fn(root / str(sizes[0]))  # warm-up: imports, TensorStore's drivers, JAX's first sharding
    print(f"{'command':8} {'leaves':>7} {'time s':>8} {'x per 10x leaves':>17}   goal: within {GOAL:.0f}x, median of {repeat}")
    worst = 0.0
    for name, fn in commands.items():
        before = None
        for n in sizes:
            t = timed(lambda n=n, fn=fn: fn(root / str(n)), repeat)
            ratio = "" if before is None else f"{(t / before[1]) ** (1 / math.log10(n / before[0])):.1f}x"
            if before is not None:
                worst = max(worst, float(ratio[:-1]))
            print(f"{name:8} {n:7,} {t:8.2f} {ratio:>17}")
            before = (n, t)
    print(f"worst: {worst:.1f}x per 10x leaves ({'within' if worst <= GOAL else 'OVER'} the goal of {GOAL:.0f}x)")


if __name__ == "__main__":
    main()
