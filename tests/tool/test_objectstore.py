"""Checkpoints in object storage (``ckptlab.tool.objectstore``): a real Orbax checkpoint copied byte for
byte into an S3-compatible server started here (moto's, from PyPI: ``ckptlab.s3server``), then
inspected, planned, diffed and measured by its ``s3://`` url, the bytes each host reads counted by
the server and set against the plan's bracket, beside a control restore whose target suits the saved
chunks. What the tool refuses, and what it leaves behind (nothing)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding, PartitionSpec as P

from ckptlab.layout import course_mesh
from ckptlab.s3server import LocalS3
from ckptlab.tool import objectstore
from ckptlab.tool.diffing import diff_checkpoints
from ckptlab.tool.inspection import inspect_checkpoint
from ckptlab.tool.measuring import measure_restore
from ckptlab.tool.planning import plan_restore

pytestmark = pytest.mark.slow
URL = "s3://ckpt/runs/seed"


def _tree(changed: bool = False) -> dict:
    mesh = course_mesh({"data": 2, "model": 8})
    w = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
    if changed:
        w[300, 7] += 1
    return {"params": {"w": jax.device_put(w, NamedSharding(mesh, P("data", "model"))),
                       "b": jax.device_put(np.zeros(1024, np.float32), NamedSharding(mesh, P("model")))},
            "note": "a string"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The server, its address in this process's environment, and a checkpoint saved by 16 devices
    (random float32: what is stored is what is read) copied into it under ``URL``."""
    local = tmp_path_factory.mktemp("s3") / "seed"
    ocp.PyTreeCheckpointer().save(local, _tree())
    saved = dict(os.environ)
    with LocalS3() as s3:
        os.environ.update(s3.env)
        assert objectstore.upload(local, URL) > 1.5 * 2**20  # 2 MiB of float32, zstd-compressed a little
        yield s3, local
    os.environ.clear()
    os.environ.update(saved)


def test_inspect_plan_and_diff_by_url_say_what_they_say_of_the_local_copy(store):
    s3, local = store
    remote, here = inspect_checkpoint(URL), inspect_checkpoint(local)
    assert [(a.path, a.shape, a.chunk_shape, a.chunks, a.stored_bytes) for a in remote.arrays] == \
           [(a.path, a.shape, a.chunk_shape, a.chunks, a.stored_bytes) for a in here.arrays]
    assert [o.path for o in remote.others] == ["note"]
    mesh, specs = {"x": 16}, {"*w": (None, "x")}
    far, near = plan_restore(URL, mesh, specs, hosts=2), plan_restore(local, mesh, specs, hosts=2)
    assert far.path == URL and far.total("floor") == near.total("floor") and far.total("ceiling") == near.total("ceiling")
    assert diff_checkpoints(URL, local).same
    # the command line names the url, never the private folder the records were copied into
    shown = subprocess.run([sys.executable, "-m", "ckptlab", "inspect", URL], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"{URL}  (ocdbt)") and "ckptlab-s3-" not in shown.stdout


def test_diff_by_url_finds_a_changed_value(store, tmp_path):
    ocp.PyTreeCheckpointer().save(tmp_path / "changed", _tree(changed=True))
    objectstore.upload(tmp_path / "changed", "s3://ckpt/runs/changed")
    report = diff_checkpoints(URL, "s3://ckpt/runs/changed")
    assert not report.same and list(report.values) == ["params/w"] and report.values["params/w"]["elements"] == 1
    assert "(300, 7)" in report.text()


def _server_bytes(s3, pids) -> list:
    counts = s3.counts()
    return [counts.get(pid, {}).get("bytes", 0) for pid in pids]


def test_measure_by_url_each_hosts_range_gets_counted_by_the_server_fall_in_the_plans_bracket(store):
    """Two hosts restore with TensorStore's range GETs. Misaligned (each device a 64-column slice of
    chunks 128 wide: two devices read each chunk) the server sends each host near its ceiling, twice
    its floor; the control, aligned (each device the one chunk it saved), reads its floor: the count
    could have shown either."""
    s3, _ = store
    results = {}
    mesh = {"data": 2, "model": 8}
    for name, specs in (("misaligned", {"*w": (None, ("data", "model"))}), ("aligned", {"*w": ("data", "model")})):
        s3.reset()
        result = measure_restore(URL, mesh, specs, hosts=2)
        served = _server_bytes(s3, result["pids"])
        plan = result["plan"]
        slack = plan.metadata_bytes + 64 * 1024  # the manifest, the B+tree's nodes, the arrays' headers
        for h in range(2):
            assert plan.total("floor")[h] <= served[h] <= plan.total("ceiling")[h] + slack, (name, h, served)
            assert abs(served[h] - result["read"][h]) <= slack  # TensorStore's own count agrees with the server's
        assert s3.counts()[result["pids"][0]]["ranged"] >= 4  # byte ranges, not whole files
        results[name] = (served, plan)
    (mis, mis_plan), (ali, ali_plan) = results["misaligned"], results["aligned"]
    for h in range(2):
        assert mis_plan.total("ceiling")[h] >= 1.8 * mis_plan.total("floor")[h]
        assert mis[h] >= 1.5 * mis_plan.total("floor")[h]  # near its ceiling
        assert ali[h] <= 1.1 * ali_plan.total("floor")[h] + 64 * 1024  # at its floor
        assert mis[h] >= 1.4 * ali[h]


def test_what_is_refused_says_what_to_pass(store, tmp_path):
    s3, _ = store
    for url, words in (("gs://bucket/ckpt", "gs:// is not read by this tool"),
                       ("s3://ckpt/runs/nothing-here", "holds nothing"),
                       ("s3://no-such-bucket/x", "cannot be listed"),
                       ("s3:///x", "not a bucket and a path")):
        with pytest.raises(objectstore.Unreadable, match=words):
            inspect_checkpoint(url)
    # a checkpoint saved without OCDBT: its chunk sizes are its files' sizes, which a listing does not give
    handler = ocp.PyTreeCheckpointHandler(use_ocdbt=False)
    ocp.Checkpointer(handler).save(tmp_path / "zarr", args=ocp.args.PyTreeSave({"a": np.arange(64, dtype=np.float32)}))
    objectstore.upload(tmp_path / "zarr", "s3://ckpt/runs/zarr")
    with pytest.raises(ValueError, match="saved without OCDBT"):
        inspect_checkpoint("s3://ckpt/runs/zarr")
    assert inspect_checkpoint(tmp_path / "zarr").layout == "zarr"  # the control: on local disk it is read


def test_an_unreachable_store_is_named_within_seconds(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: nothing listens
    with pytest.raises(objectstore.Unreadable, match=r"cannot be listed in the store at http://127.0.0.1:9"):
        objectstore.fetch("s3://ckpt/elsewhere")


def test_a_hostile_store_writes_nothing_outside_its_copy_and_reads_no_giant_record(store, monkeypatch):
    s3, _ = store
    assert not objectstore._safe("a/../../etc/x") and not objectstore._safe("/abs") and not objectstore._safe("a//b")
    assert objectstore._safe("params/w/.zarray") and objectstore._safe("ocdbt.process_0/manifest.ocdbt")
    kv = ts.KvStore.open(objectstore.s3_spec("ckpt", "hostile/")).result()
    kv.write("_METADATA", b"{}").result()
    kv.write("a//b", b"1").result()  # a key with an empty part: the server keeps it as it is
    with pytest.raises(objectstore.Unreadable, match="names no place inside it"):
        objectstore.fetch("s3://ckpt/hostile")
    # a record over the limit is refused before it is read (one-byte range GET past the limit)
    big = ts.KvStore.open(objectstore.s3_spec("ckpt", "big/")).result()
    big.write("_METADATA", b"{" + b" " * 4096 + b"}").result()
    monkeypatch.setattr(objectstore, "RECORD_LIMIT", 1024)
    s3.reset()
    with pytest.raises(objectstore.Unreadable, match="larger than this tool reads"):
        objectstore.fetch("s3://ckpt/big")
    assert sum(c["bytes"] for c in s3.counts().values()) < 1024  # its 4 KiB were never sent
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*", "big"))  # the copy cut short: removed
    monkeypatch.setattr(objectstore, "RECORD_LIMIT", 8192)  # the control: under the limit, it is copied
    assert (objectstore.fetch("s3://ckpt/big").folder / "_METADATA").stat().st_size == 4098


def test_the_command_line_leaves_no_copy_behind(store):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*")))
    run = subprocess.run([sys.executable, "-m", "ckptlab", "plan", URL, "--mesh", "x=16"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{URL} onto a mesh x 16")
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*"))) == before


def _tool_against(s3, url: str, seconds: float, kill_after: float | None = None) -> tuple[int, str, float, int]:
    """``python -m ckptlab inspect url`` against ``s3`` (its fetch given ``seconds``): (exit code, stderr,
    seconds on the clock, the largest resident memory of the tool or any process it started, in bytes).
    With ``kill_after``, the tool is SIGKILLed that many seconds in."""
    import time

    env = {**os.environ, **s3.env, objectstore.SECONDS_VARIABLE: str(seconds)}
    start = time.monotonic()
    if kill_after:  # killed once its copy's folder is there (its fetch under way), or after kill_after seconds
        proc = subprocess.Popen([sys.executable, "-m", "ckptlab", "inspect", url], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        mine = os.path.join(tempfile.gettempdir(), f"ckptlab-s3-{proc.pid}-*")
        while proc.poll() is None and not glob.glob(mine) and time.monotonic() - start < kill_after:
            time.sleep(0.1)
        time.sleep(1)
        proc.kill()
        _, err = proc.communicate()
        return proc.returncode, err, time.monotonic() - start, 0
    # Run from a process of its own, which then says the largest resident memory of the tool and every
    # process it waited for (this test process's own children: every kernel the suite started before).
    wrapper = ("import resource, subprocess, sys\n"
               f"done = subprocess.run([sys.executable, '-m', 'ckptlab', 'inspect', {url!r}], capture_output=True, text=True)\n"
               "sys.stderr.write(done.stderr)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n")
    done = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, timeout=seconds + 90)
    code, most = (int(x) for x in done.stdout.split())
    return code, done.stderr, time.monotonic() - start, most


def _records_in(s3) -> None:
    """A checkpoint's records at s3://ckpt/lied/ of ``s3`` (whatever a lying server then sends for them),
    written with its address in this process's environment for the call only."""
    saved = dict(os.environ)
    os.environ.update(s3.env)
    try:
        kv = ts.KvStore.open(objectstore.s3_spec("ckpt", "lied/")).result()
        kv.write("_METADATA", b"{}").result()
        kv.write("_CHECKPOINT_METADATA", b"{}").result()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize(("lie", "says"), [
    ("endless_listing", "did not give its listing and records within"),
    ("giant_record", "took more than"),
    ("trickle", "did not give its listing and records within"),
])
def test_a_store_that_lies_costs_the_tool_a_bounded_time_and_memory_and_leaves_nothing(lie, says):
    """A hostile holdout's lying store (a local S3 server that lies, ckptlab.s3server.Lying): a listing that
    never ends grew the tool past 900 MiB until killed at 30 s; a record sent under a 64 GiB length aborted
    it (std::bad_alloc at 3.8 GiB); a body trickled a byte every 2 s hung it. Now the listing and records
    are read by a child the tool watches: each ends the command (exit 2) within its seconds (8 here), the
    memory of every process it started under the fetch's limit and a margin (its sampling's overshoot), saying why, and no copy left.
    The control: the same records on an honest server are read (tested above for a real checkpoint)."""
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*")))
    with LocalS3(lie=lie) as s3:
        _records_in(s3)
        code, err, seconds, most = _tool_against(s3, "s3://ckpt/lied", 8.0)
    assert code == 2 and says in err, (code, err[-2000:])
    assert seconds < 8.0 + 60, seconds  # (its start and JAX's import beside the 8 s: never the lie's time)
    print(f"\n{lie}: exit {code} after {seconds:.1f} s, {most >> 20} MiB at most")
    assert most < objectstore.FETCH_MEMORY + 2**30, most >> 20  # (sampled: a fast grower overshoots a little)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*"))) == before


@pytest.mark.parametrize(("lie", "says"), [
    ("giant_node", "reading its arrays' headers took more than"),
    ("trickle_node", "did not give its arrays' headers within"),
])
def test_a_store_whose_ocdbt_tree_lies_costs_the_tool_a_bounded_time_and_memory(tmp_path, lie, says):
    """The records the tool copies first are honest; the OCDBT tree they lead to lies (its nodes, in the
    data files, sent under a 64 GiB length or a byte every 2 s), where the tool reads each array's header.
    Read by the watched child too, each ends the command (exit 2) within its seconds, saying why, and no
    copy left. The control: the same checkpoint on an honest server is inspected (tested above)."""
    local = tmp_path / "seed"
    ocp.PyTreeCheckpointer().save(local, {"w": np.arange(64, dtype=np.float32)})
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*")))
    with LocalS3(lie=lie) as s3:
        saved = dict(os.environ)
        os.environ.update(s3.env)
        try:
            objectstore.upload(local, "s3://ckpt/tree")
        finally:
            os.environ.clear()
            os.environ.update(saved)
        code, err, seconds, most = _tool_against(s3, "s3://ckpt/tree", 8.0)
    assert code == 2 and says in err, (code, err[-2000:])
    assert seconds < 2 * 8.0 + 60, seconds  # (the records' read and the headers' each given 8 s at most)
    assert most < objectstore.FETCH_MEMORY + 2**30, most >> 20
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*"))) == before


def test_a_killed_tools_copy_is_removed_by_the_next_run(store):
    """The copy's folder is named by the process it is for: one the kill left (no atexit ran) is removed by
    the next run, whatever it reads (the control: the killed run's folder was there until then)."""
    with LocalS3(lie="trickle") as lying:
        _records_in(lying)
        before = set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*")))
        code, _, _, _ = _tool_against(lying, "s3://ckpt/lied", 60.0, kill_after=60.0)
        left = set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*"))) - before
    assert code == -9 and left, (code, left)  # killed mid-fetch: its copy's folder stays behind it
    s3, _ = store
    run = subprocess.run([sys.executable, "-m", "ckptlab", "inspect", URL], capture_output=True, text=True,
                         timeout=120, env={**os.environ, **s3.env})
    assert run.returncode == 0, run.stderr
    assert not left & set(glob.glob(os.path.join(tempfile.gettempdir(), "ckptlab-s3-*")))
