"""Two real hosts on one machine: two processes joined by ``jax.distributed`` on localhost save one
sharded array with Orbax, each writing its own files.

    from ckptlab.twohost import run_two_hosts
    report = run_two_hosts(ckpt_dir)   # starts the two processes and waits for them

Each process gets ``devices_per_host`` CPU devices (4 by default, 8 in all) and uses gloo for the
cross-process collectives Orbax needs. The processes are fresh Python interpreters, so this
works from a notebook whose own JAX already runs with 16 devices.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class HostReport:
    """What one process saw: its process index, its devices, and which rows of the array it held."""

    process_index: int
    process_count: int
    local_devices: list[int]
    global_devices: int
    shards: list[dict]  # {"device": id, "index": [[start, stop], ...]}
    seconds: float



class HostFailed(RuntimeError):
    """A process :func:`run_hosts` started ended without its report; the message holds its last lines."""

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """A process started with ``start_new_session=True`` stopped with everything it started (a
    server's kernels and terminals): SIGTERM to its process group, SIGKILL after ``grace`` seconds."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except ProcessLookupError:  # (the group has ended)
        proc.wait()
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _host(process_id: int, num_processes: int, port: int, ckpt_dir: str, shape: tuple, devices_per_host: int) -> dict:
    """The body of one host: join the cluster, build a global array from local shards, save it."""
    start = time.perf_counter()
    from ckptlab.devices import prepare_environment

    prepare_environment(devices_per_host)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=num_processes, process_id=process_id,
                               initialization_timeout=120)
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()), ("x",))  # all 8 devices, both hosts
    sharding = NamedSharding(mesh, PartitionSpec("x"))
    full = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    # Every host builds only the shards of its own devices, from the index each one is given.
    w = jax.make_array_from_callback(shape, sharding, lambda index: full[index])
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(ckpt_dir, {"w": w})
    checkpointer.wait_until_finished()
    shards = [{"device": int(s.device.id),
               "index": [list(sl.indices(n)[:2]) for sl, n in zip(s.index, shape)]}
              for s in w.addressable_shards]
    report = {"process_index": jax.process_index(), "process_count": jax.process_count(),
              "local_devices": [int(d.id) for d in jax.local_devices()], "global_devices": jax.device_count(),
              "shards": sorted(shards, key=lambda s: s["device"]), "seconds": time.perf_counter() - start}
    jax.distributed.shutdown()
    return report


def run_hosts(commands: list[list[str]], timeout: float, what: str = "host process") -> list[dict]:
    """Run one fresh process per command (the hosts of one job, or a measuring child), with JAX on
    the CPU and none of this process's device flags; return the last JSON line each printed, in
    order. A process that fails raises, with its last messages."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    # never the current folder on a child's import path (``-c`` puts it first: a checkpoint's folder,
    # run from inside, could hold a json.py), and this package's own folder where no install names it
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH"))))
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for command in commands]
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            outputs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    reports = []
    for i, (code, out, err) in enumerate(outputs):
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            tail = "\n".join(err.strip().splitlines()[-15:])
            raise HostFailed(f"{what} {i} failed (exit code {code}). Its last messages:\n{tail}")
        reports.append(json.loads(lines[-1]))
    return reports


def run_two_hosts(ckpt_dir: str, shape: tuple = (64, 16), devices_per_host: int = 4,
                  timeout: float = 300.0) -> list[HostReport]:
    """Start two host processes on localhost that save ``w`` (``shape``, float32, rows sharded over
    all their devices) to ``ckpt_dir``; return what each host reports, process 0 first."""
    port = free_port()
    commands = [[sys.executable, "-m", "ckptlab.twohost",
                 json.dumps([i, 2, port, os.path.abspath(ckpt_dir), list(shape), devices_per_host])] for i in range(2)]
    reports = [HostReport(**r) for r in run_hosts(commands, timeout)]
    return sorted(reports, key=lambda r: r.process_index)


if __name__ == "__main__":
    process_id, num_processes, port, ckpt_dir, shape, per_host = json.loads(sys.argv[1])
    print(json.dumps(_host(process_id, num_processes, port, ckpt_dir, tuple(shape), per_host)), flush=True)
