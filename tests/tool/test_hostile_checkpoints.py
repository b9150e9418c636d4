"""``python -m ckptlab`` on a checkpoint someone else wrote: each promise of ``ckptlab.tool.untrusted``
attacked with a checkpoint crafted from a real one (saved with Orbax, then its records edited), each
beside the same command on the real checkpoint, which works.

- Time and memory follow what is stored: a chunk grid of 2^80 chunks declared over two stored
  (``plan`` listed every position: out of memory) is refused in a fresh process held to 512 MiB
  resident (2 GiB of address space) and a timeout; ``measure`` refuses it before a restore, and
  ``inspect --figure`` (a patch per chunk) before drawing. A 16 GiB array of which one chunk of its
  4,096 is stored (``diff`` read all of them: 51 s on a 2-core machine) is refused naming
  ``--max-bytes``; accepted with it, ``diff`` reads only the chunks stored and finds exactly the
  values planted.
- Nothing outside the folder is read: a link to ``/`` in an array folder, a chunk that is a link to
  a file outside, a chunk that is a pipe, each refused by inspect, plan and diff; a link inside the
  folder to a file inside it is read.
- A ``_METADATA`` nested 20,000 deep is refused as damaged (a traceback before).
- No code runs: run from inside a checkpoint holding ``json.py``, ``argparse.py`` and their kin,
  ``inspect``, ``plan``, ``diff`` and ``measure`` (whose restoring processes start there too) import
  none (``python -m`` put the current folder first: ``argparse.py`` ran before); a pickle where old
  Orbax kept its tree is never loaded.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding, PartitionSpec as P

from ckptlab.layout import course_mesh
from ckptlab.tool.cli import main
from ckptlab.tool.diffing import _open, blocks, diff_checkpoints, stored_blocks
from ckptlab.tool.inspection import inspect_checkpoint
from ckptlab.tool.measuring import measure_restore
from ckptlab.tool.planning import plan_restore
from ckptlab.tool.untrusted import Unbounded

ROOT = Path(__file__).resolve().parents[2]
RESIDENT = 512 * 2**20  # the most a command may hold on these (a plan of the real one: about 200 MiB)
ADDRESS = 2 * 2**30  # a hard stop besides (JAX reserves about 1 GiB of address space as it starts)
TIMEOUT = 120  # seconds: a fresh process starts JAX in 1-2 s on an idle machine
MESH = ["--mesh", "data=2,model=2"]


def _tree():
    sharding = NamedSharding(course_mesh({"x": 2}), P("x"))
    return {"params": {"w": jax.device_put(np.arange(64 * 32, dtype=np.float32).reshape(64, 32), sharding),
                       "b": np.ones(4, np.float32)}}


def _save(path: Path, ocdbt: bool = True) -> Path:
    with ocp.PyTreeCheckpointer(use_ocdbt=ocdbt) as checkpointer:
        checkpointer.save(path, _tree())
    return path


def _kvstore(path: Path):
    return ts.KvStore.open({"driver": "ocdbt", "base": f"file://{path}/"}).result()


def _declare(path: Path, array: str, **header) -> None:
    """What a checkpoint from elsewhere may declare: ``array``'s zarr header (its shape, its chunks)
    rewritten inside the OCDBT database, where Orbax reads it."""
    kv = _kvstore(path)
    record = json.loads(kv.read(f"{array}/.zarray").result().value)
    kv.write(f"{array}/.zarray", json.dumps({**record, **header})).result()


def _array(path: Path, array: str):
    return ts.open({"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": f"file://{path}/", "path": f"{array}/"}},
                   open=True).result()


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> Path:
    return _save(tmp_path_factory.mktemp("real") / "ckpt")


class Ran:
    def __init__(self, code: int, out: str, err: str, seconds: float, resident: int):
        self.code, self.out, self.err, self.seconds, self.resident = code, out, err, seconds, resident


def _run(tmp_path: Path, *args, cwd: Path = ROOT) -> Ran:
    """``python -m ckptlab ARGS`` in a fresh process, its address space capped as it starts; its peak
    resident memory from the kernel (its VmHWM, read every 50 ms), a kill at the timeout."""
    out, err = tmp_path / f"out{time.monotonic_ns()}", tmp_path / f"err{time.monotonic_ns()}"
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    start = time.monotonic()
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "ckptlab", *map(str, args)], stdout=o, stderr=e, cwd=cwd,
                                env=env)
    resource.prlimit(proc.pid, resource.RLIMIT_AS, (ADDRESS, ADDRESS))  # (no fork of this JAX process to set it)
    peak = 0
    while True:
        peak = max(peak, _hiwater(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > TIMEOUT:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            pytest.fail(f"python -m ckptlab {' '.join(map(str, args))} ran past {TIMEOUT} s")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Ran(proc.returncode, out.read_text(), err.read_text(), time.monotonic() - start, peak)


def _hiwater(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM: its own, since its exec), 0 once it is gone.
    Not wait4's ru_maxrss: where the child was forked rather than spawned, that counts the copy of
    this test process it was before its exec (a pytest process that has run JAX for a while: 1 GB)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0)


# ------------------------------------------------------------------------ time and memory: plan
@pytest.fixture(scope="module")
def grid(real, tmp_path_factory) -> Path:
    """2^40 x 2^40 chunks of one element declared, the two chunks of the real save stored."""
    path = tmp_path_factory.mktemp("grid") / "ckpt"
    shutil.copytree(real, path)
    _declare(path, "params.w", shape=[2**40, 2**40], chunks=[1, 1])
    return path


def test_a_grid_declared_far_beyond_what_is_stored_is_refused_quickly_in_little_memory(real, grid, tmp_path, capsys):
    refused = _run(tmp_path, "plan", grid, *MESH)
    assert refused.code == 2, refused.err[-2000:]
    assert "declares 1,208,925,819,614,629,174,706,177 chunks and stores 3" in refused.err
    assert "pass --max-chunks 1208925819614629174706177" in refused.err and "Traceback" not in refused.err
    assert refused.resident < RESIDENT, refused.resident
    honest = _run(tmp_path, "plan", real, *MESH)  # the control: the same command, the same limits
    assert honest.code == 0 and "host 0: reads" in honest.out, honest.err[-2000:]
    assert honest.resident < RESIDENT
    # inspect shows what it declares (a count, never a list); measure refuses before a restore starts
    info = inspect_checkpoint(grid)
    w = next(a for a in info.arrays if a.path == "params/w")
    assert (w.grid, w.chunks) == (2**80, 2)
    assert main(["inspect", str(grid), "--figure", "params/w", "--out", str(tmp_path / "w.png")]) == 2  # one per chunk
    assert "params/w has 1,208,925,819,614,629,174,706,176 chunks: a figure draws at most 4,096" in capsys.readouterr().err
    start = time.monotonic()
    with pytest.raises(Unbounded, match="--max-chunks"):
        measure_restore(grid, {"data": 2, "model": 2})
    assert time.monotonic() - start < TIMEOUT
    with pytest.raises(Unbounded, match="more than the 100 this command walks \\(as asked\\)"):
        plan_restore(grid, {"data": 2, "model": 2}, max_chunks=100)
    assert plan_restore(real, {"data": 2, "model": 2}, max_chunks=3).arrays  # the real one's 3 chunks, as asked


# ------------------------------------------------------------------------ time and memory: diff
@pytest.fixture(scope="module")
def sparse(real, tmp_path_factory) -> tuple[Path, Path]:
    """``params/w`` declared 2^20 x 2^12 float32 (16 GiB) in chunks of 1024 x 1024 (4,096 of them);
    ``a`` stores one, ``b`` the same with one value changed and a second chunk of four nonzero values."""
    root = tmp_path_factory.mktemp("sparse")
    a, b = root / "a", root / "b"
    shutil.copytree(real, a)
    kv = _kvstore(a)
    kv.delete_range(ts.KvStore.KeyRange("params.w/0", "params.w/:")).result()  # the chunks of the old grid
    _declare(a, "params.w", shape=[2**20, 2**12], chunks=[1024, 1024])
    _array(a, "params.w")[0:64, 0:32].write(np.arange(64 * 32, dtype=np.float32).reshape(64, 32)).result()
    shutil.copytree(a, b)
    w = _array(b, "params.w")
    w[5, 7].write(np.float32(-1)).result()
    w[2048:2050, 0:2].write(np.full((2, 2), 3, np.float32)).result()
    return a, b


def test_diff_of_a_size_declared_far_beyond_what_is_stored_is_refused_or_reads_only_what_is_stored(
        real, sparse, tmp_path):
    a, b = sparse
    refused = _run(tmp_path, "diff", a, b)
    assert refused.code == 2 and "declares 16.00 GiB of values and stores" in refused.err, refused.err[-2000:]
    assert "pass --max-bytes 17179869200" in refused.err and refused.resident < RESIDENT
    accepted = _run(tmp_path, "diff", a, b, "--max-bytes", "64GiB", "--json")
    assert accepted.code == 1, accepted.err[-2000:]  # they differ
    found = json.loads(accepted.out)
    assert found["values"]["params/w"]["elements"] == 5 and found["values"]["params/w"]["max_abs"] == 168.0  # 167 -> -1
    assert accepted.resident < RESIDENT
    assert _run(tmp_path, "diff", a, a, "--max-bytes", "64GiB").code == 0
    # what was read: the two chunks stored (one block each), of the 4,096 declared
    ia, ib = inspect_checkpoint(a), inspect_checkpoint(b)
    x, y = ia.arrays[1], ib.arrays[1]
    assert x.path == "params/w" and (x.grid, x.chunks, y.chunks) == (4096, 1, 2)
    read = list(stored_blocks(x, y, _open(ia, x), _open(ib, y), 4))
    assert read == [(slice(0, 1024), slice(0, 1024)), (slice(2048, 3072), slice(0, 1024))]
    # the control: a real checkpoint stores every chunk, and is read block by block as before
    ir = inspect_checkpoint(real)
    r = ir.arrays[1]
    assert list(stored_blocks(r, r, _open(ir, r), _open(ir, r), 4, 1024)) == list(blocks(r.shape, 4, 1024, r.chunk_shape))
    assert diff_checkpoints(real, real).same and _run(tmp_path, "diff", real, real).code == 0


# ------------------------------------------------------------------------ nothing outside the folder
@pytest.fixture(scope="module")
def zarr(tmp_path_factory) -> Path:
    return _save(tmp_path_factory.mktemp("zarr") / "ckpt", ocdbt=False)


def _commands(path: Path, other: Path) -> list[list[str]]:
    return [["inspect", str(path)], ["plan", str(path), *MESH], ["diff", str(other), str(path)]]


@pytest.mark.parametrize("attack", ["link to / in an array folder", "a chunk linked to a file outside",
                                    "a chunk that is a pipe", "the item folder linked outside"])
def test_nothing_outside_the_folder_is_read(zarr, tmp_path, capsys, attack):
    path = tmp_path / "ckpt"
    shutil.copytree(zarr, path)
    chunk = path / "params.w" / "0.0"
    if attack == "link to / in an array folder":
        os.symlink("/", path / "params.w" / "root")
        said = f"{path}/params.w/root is a link to /, outside {path}"
    elif attack == "a chunk linked to a file outside":
        outside = tmp_path / "secret"
        shutil.copy(chunk, outside)
        chunk.unlink()
        os.symlink(outside, chunk)
        said = f"{chunk} is a link to {outside}, outside {path}"
    elif attack == "a chunk that is a pipe":
        chunk.unlink()
        os.mkfifo(chunk)
        said = f"{chunk} is a pipe, not a file a save writes"
    else:  # a manager root whose step is a link to a checkpoint elsewhere
        path = tmp_path / "root"
        path.mkdir()
        os.symlink(zarr, path / "3")
        said = f"{path}/3 leads to {zarr}, outside {path}"
    for command in _commands(path, zarr):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert said in err and ("pipe" in attack or "this tool reads nothing outside the folder it is given" in err), err
    # the control: a link inside the folder to a file inside it is read, as the real checkpoint is
    honest = tmp_path / "honest"
    shutil.copytree(zarr, honest)
    moved = honest / "params.w" / "elsewhere"
    (honest / "params.w" / "0.0").rename(moved)
    os.symlink(moved, honest / "params.w" / "0.0")
    for command in _commands(honest, zarr):
        assert main(command) == 0, (command, capsys.readouterr().err)


# ------------------------------------------------------------------------ records nested too deep
def test_a_metadata_nested_20000_deep_is_refused_as_damaged(real, tmp_path, capsys):
    deep = tmp_path / "deep"
    shutil.copytree(real, deep)
    text = (deep / "_METADATA").read_text()
    (deep / "_METADATA").write_text(text[:-1] + ', "deep": ' + "[" * 20_000 + "]" * 20_000 + "}")
    for command in _commands(deep, real):
        assert main(command) == 2, command
        assert "_METADATA is damaged (not the JSON Orbax writes: maximum recursion depth" in capsys.readouterr().err
    for command in _commands(real, real):  # the control
        assert main(command) == 0, command


# ------------------------------------------------------------------------ no code runs
_PAYLOAD = "import pathlib; pathlib.Path({marker!r}).write_text(__name__)\n"


def test_no_code_of_the_checkpoint_runs_even_run_from_inside_it(real, tmp_path):
    path = tmp_path / "ckpt"
    shutil.copytree(real, path)
    marker = tmp_path / "ran"
    for name in ("json", "argparse", "numpy", "tensorstore", "jax", "orbax", "re", "logging", "sitecustomize"):
        (path / f"{name}.py").write_text(_PAYLOAD.format(marker=str(marker)))
    commands = [["inspect", "."], ["plan", ".", *MESH], ["diff", ".", str(real)]]
    for command in [*commands, ["measure", ".", "--mesh", "x=2"]]:  # measure's restoring processes start here too
        ran = _run(tmp_path, *command, cwd=path)
        assert ran.code == 0, (command, ran.err[-2000:])
        assert not marker.exists(), (command, marker.read_text())
    import pickle

    class Payload:
        def __reduce__(self):
            return (Path(marker).write_text, ("unpickled",))

    (path / "checkpoint").write_bytes(pickle.dumps(Payload()))  # where old Orbax kept a tree (msgpack, not pickle)
    for command in commands:
        assert main([c if c != "." else str(path) for c in command]) == 0 and not marker.exists(), command
    # measure restores it, in processes of its own, which Orbax refuses (not msgpack): said in a line, no traceback
    ran = _run(tmp_path, "measure", str(path), "--mesh", "x=2")
    assert ran.code == 2 and not marker.exists(), ran.err[-2000:]
    assert ran.err.startswith("error: the restore measure times did not finish: restoring host 0 failed"), ran.err[-2000:]
    assert "Traceback" not in ran.err.split("Its last messages:")[0], ran.err[-2000:]


def test_a_file_whose_header_nests_too_deep_is_told_apart_without_a_traceback(tmp_path):
    """A file passed where a folder is wanted, whose 'safetensors header' nests 100,000 lists deep:
    told to pass a folder, no RecursionError. Control: a real safetensors file is named as one."""
    from ckptlab.tool.files import why_not_a_folder

    deep = b"[" * 100_000 + b"]" * 100_000
    path = tmp_path / "deep.bin"
    path.write_bytes(len(deep).to_bytes(8, "little") + deep)
    assert why_not_a_folder(path).endswith("pass the checkpoint's folder (the one holding _METADATA)")
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    real = tmp_path / "real.bin"
    real.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    assert "is a safetensors file of 1 tensor(s)" in why_not_a_folder(real)
