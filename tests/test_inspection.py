"""``ckptlab.inspection`` (``python -m ckptlab inspect``) against what Orbax's metadata and the files
say, on checkpoints saved for real: 1, 8 and 16 devices, OCDBT and plain zarr, v0 and v1, a
CheckpointManager root with a step still being written; and its refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ckptlab.inspection import NotACheckpoint, inspect_checkpoint, locate
from ckptlab.layout import course_mesh

ROWS, COLS = 512, 256  # 512 KiB of float32


def _tree():
    rng = np.random.default_rng(0)
    mesh16, mesh8 = course_mesh({"x": 16}), course_mesh({"data": 2, "model": 4})
    return {
        "params": {"w": jax.device_put(rng.standard_normal((ROWS, COLS)).astype(np.float32), NamedSharding(mesh16, P("x"))),
                   "zeros": jax.device_put(np.zeros((ROWS, COLS), np.float32), NamedSharding(mesh16, P(None, "x"))),
                   "e": jax.device_put(rng.standard_normal((64, 32)).astype(np.float32), NamedSharding(mesh8, P("model")))},
        "one": jax.device_put(rng.standard_normal((8,)).astype(np.float32), jax.devices()[0]),
        "step": np.array(7, np.int32),
    }


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    tree = _tree()
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(root / "ocdbt", tree)
    checkpointer.wait_until_finished()
    with ocp.PyTreeCheckpointer(use_ocdbt=False) as zarr:
        zarr.save(root / "zarr", tree)
    from orbax.checkpoint import v1

    v1.save(root / "v1", tree)
    manager = ocp.CheckpointManager(root / "manager")
    for step in (10, 20):
        manager.save(step, args=ocp.args.StandardSave(tree))
    manager.wait_until_finished()
    manager.close()
    # a step a killed save left behind
    shutil.copytree(root / "manager" / "20", root / "manager" / "30.orbax-checkpoint-tmp-1234")
    return root, tree


def _as_saved(info):
    return {a.path: a for a in info.arrays}


@pytest.mark.parametrize("where", ["ocdbt", "zarr", "v1", "manager"])
def test_inspect_equals_orbax_metadata(saved, where):
    root, tree = saved
    info = inspect_checkpoint(root / where)
    meta = ocp.StandardCheckpointer().metadata(info.path).item_metadata.tree
    arrays = _as_saved(info)
    assert set(arrays) == {"params/w", "params/zeros", "params/e", "one", "step"}
    for path, a in arrays.items():
        m = meta
        for part in path.split("/"):
            m = m[part]
        assert a.shape == tuple(m.shape) and a.dtype == str(m.dtype), path
        assert a.chunk_shape == tuple(m.storage.chunk_shape), path
    w, e = arrays["params/w"], arrays["params/e"]
    assert w.mesh == {"x": 16} and w.spec == ("x",) and w.devices == 16 and w.replicas == 1
    assert w.chunk_shape == (ROWS // 16, COLS) and w.chunks == 16
    # the data axis's two replicas each write half of a shard (replica-parallel): 8 chunks of 4 shards
    assert e.mesh == {"data": 2, "model": 4} and e.spec == ("model",) and e.replicas == 2
    assert e.chunk_shape == (8, 32) and e.chunks == 8
    assert arrays["one"].devices == 1 and arrays["one"].mesh is None
    assert info.layout == ("zarr" if where == "zarr" else "ocdbt")
    # the bytes come from the files, not from the shapes: random floats keep their size, zeros shrink
    assert 0.85 * w.nbytes < w.bytes_on_disk < 1.1 * w.nbytes, (w.bytes_on_disk, w.nbytes)
    assert arrays["params/zeros"].bytes_on_disk < 0.05 * w.nbytes


def test_zarr_bytes_are_the_chunk_files_sizes(saved):
    root, _ = saved
    w = _as_saved(inspect_checkpoint(root / "zarr"))["params/w"]
    folder = root / "zarr" / w.storage_key
    files = [p for p in folder.iterdir() if not p.name.startswith(".")]
    assert w.chunks == len(files) and w.bytes_on_disk == sum(p.stat().st_size for p in files)


def test_ocdbt_bytes_add_up_to_the_data_files(saved):
    """Every chunk's length in the B+tree, over all arrays, against the data files on disk: the data
    files also hold the tree's nodes, so the chunks are at most their size, and nearly all of it."""
    root, _ = saved
    info = inspect_checkpoint(root / "ocdbt")
    data_files = sum(p.stat().st_size for p in (root / "ocdbt").rglob("d/*") if p.is_file())
    assert info.bytes_on_disk <= data_files and info.bytes_on_disk > 0.9 * data_files, (info.bytes_on_disk, data_files)
    # large chunks in the writing process's files; small ones inline in the tree's nodes
    assert set(info.per_writer()) == {"ocdbt.process_0", "inline in the B+tree"}, info.per_writer()
    assert info.per_writer()["ocdbt.process_0"] > 0.9 * info.bytes_on_disk


def test_a_manager_root_reads_its_newest_committed_step_and_names_the_unfinished_one(saved):
    root, _ = saved
    info = inspect_checkpoint(root / "manager")
    assert info.step == 20 and info.path == root / "manager" / "20" / "default"
    assert info.pending == ["30.orbax-checkpoint-tmp-1234"] and "30.orbax-checkpoint-tmp-1234" in info.table()
    assert inspect_checkpoint(root / "manager", step=10).step == 10
    assert locate(root / "manager" / "10")[0] == root / "manager" / "10" / "default"


def test_refusals_say_what_to_pass(saved, tmp_path):
    root, _ = saved
    (tmp_path / "empty").mkdir()
    (tmp_path / "unknown").mkdir()
    (tmp_path / "unknown" / "_METADATA").write_text("not Orbax's")
    cases = {tmp_path / "missing": "does not exist", root / "ocdbt" / "_METADATA": "is a file",
             root / "manager" / "30.orbax-checkpoint-tmp-1234": "still being written",
             tmp_path / "empty": "is not an Orbax checkpoint",
             tmp_path / "unknown": "Orbax could not read its metadata"}
    for path, said in cases.items():
        with pytest.raises(NotACheckpoint, match=said):
            inspect_checkpoint(path)
    with pytest.raises(NotACheckpoint, match=r"no step 5; its steps: \[10, 20\]"):
        inspect_checkpoint(root / "manager", step=5)


def test_the_command_prints_the_table_and_json_and_exits_2_on_a_bad_path(saved, tmp_path, capsys):
    from ckptlab.cli import main

    root, _ = saved
    assert main(["inspect", str(root / "ocdbt")]) == 0
    out = capsys.readouterr().out
    assert "params/w" in out and "P('x')" in out
    assert "on disk, by where: inline in the B+tree" in out and "; ocdbt.process_0 " in out
    assert main(["inspect", "--json", str(root / "manager")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == 20 and {a["path"] for a in report["arrays"]} >= {"params/w", "params/e"}
    # as a learner types it: python -m ckptlab, in a fresh process, a bad path said in one line
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"}
    bad = subprocess.run([sys.executable, "-m", "ckptlab", "inspect", str(tmp_path)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert bad.returncode == 2 and "is not an Orbax checkpoint" in bad.stderr and "Traceback" not in bad.stderr


def test_a_placement_figure_per_array_on_request(saved, tmp_path, capsys):
    from ckptlab.cli import main

    root, _ = saved
    out = tmp_path / "w.png"
    assert main(["inspect", str(root / "ocdbt"), "--figure", "params/e", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert main(["inspect", str(root / "ocdbt"), "--figure", "params/nope"]) == 2
    assert "no array 'params/nope'" in capsys.readouterr().err
