"""Benchmark: loading a safetensors file shard by shard, as each of 16 devices would, against
loading it whole. Prints bytes read (counted by the kernel) and wall time, with their ratios.

Run: ``make bench`` (or ``python bench/bench_shard_reads.py --mib 256``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=64, help="size of the tensor in MiB")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from safetensors.numpy import load_file, save_file

    from ckptlab.readcount import count_reads
    from solutions.unit4 import coalesce_runs, index_domain_to_byte_runs, parse_safetensors_header, read_shard

    rows = args.mib * 2**20 // (4 * 1024)
    path = Path(tempfile.mkdtemp(prefix="bench-reads-")) / "w.safetensors"
    save_file({"w": np.random.default_rng(0).standard_normal((rows, 1024)).astype(np.float32)}, path)
    size = path.stat().st_size

    def per_device(split_axis: int) -> list:
        n = 16
        if split_axis == 0:
            return [((i * rows // n, (i + 1) * rows // n), (0, 1024)) for i in range(n)]
        return [((0, rows), (i * 64, (i + 1) * 64)) for i in range(n)]

    def timed(fn):
        times, read = [], 0
        for _ in range(args.repeat):
            with count_reads() as reads:
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            read = reads.bytes
        return statistics.median(times), read

    # The page cache is warm after the first run: this measures the reading code, not the disk.
    whole_t, whole_b = timed(lambda: load_file(path))  # safetensors memory-maps: its reads are page faults
    print(f"file: {size / 2**20:.0f} MiB, one float32 tensor ({rows}, 1024), 16 devices, median of {args.repeat}")
    print(f"  {'how':40} {'bytes read (kernel)':>22} {'x file':>7} {'wall':>8}")
    print(f"  {'safetensors load_file (whole)':40} {'(memory map)':>22} {'':>7} {whole_t:7.3f}s")
    for label, axis in (("16 row shards, one run each", 0), ("16 column shards, strided runs", 1)):
        domains = per_device(axis)
        t, b = timed(lambda domains=domains: [read_shard(str(path), "w", d) for d in domains])
        print(f"  {label:40} {b:22,} {b / size:7.3f} {t:7.3f}s   ({len(domains)} read_shard calls)")
    # Orbax's trade-off for strided shards: coalesce runs across small gaps, read fewer, bigger blocks.
    header, data_start = parse_safetensors_header(str(path))

    def coalesced(bounds):
        runs = index_domain_to_byte_runs(bounds, (rows, 1024), 4, data_start)
        with open(path, "rb", buffering=0) as f:
            for offset, length in coalesce_runs(runs, 4096):
                f.seek(offset)
                f.read(length)

    t, b = timed(lambda: [coalesced(d) for d in per_device(1)])
    print(f"  {'16 column shards, gaps <= 4 KiB merged':40} {b:22,} {b / size:7.3f} {t:7.3f}s   (fewer reads, 16x the bytes)")
    one = per_device(0)[0]
    t, b = timed(lambda: read_shard(str(path), "w", one))
    print(f"  {'one device, one row shard':40} {b:22,} {b / size:7.3f} {t:7.3f}s   ({whole_t / t:.1f}x faster than whole)")


if __name__ == "__main__":
    main()
