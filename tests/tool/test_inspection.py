"""``ckptlab.tool.inspection`` (``python -m ckptlab inspect``) against what Orbax's metadata and the files
say, on checkpoints saved for real: 1, 8 and 16 devices, OCDBT and plain zarr, v0 and v1, a
CheckpointManager root with a step still being written, roots whose steps Orbax names with a prefix,
a folder of plain saves, a v1 partial save, keys holding a "/"; and its refusals, damaged
checkpoints among them."""

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

from ckptlab.layout import course_mesh
from ckptlab.tool.inspection import NotACheckpoint, human, inspect_checkpoint, locate

ROWS, COLS = 512, 256  # 512 KiB of float32


def _tree():
    rng = np.random.default_rng(0)
    mesh16, mesh8 = course_mesh({"x": 16}), course_mesh({"data": 2, "model": 4})
    return {
        "params": {"w": jax.device_put(rng.standard_normal((ROWS, COLS)).astype(np.float32), NamedSharding(mesh16, P("x"))),
                   "zeros": jax.device_put(np.zeros((ROWS, COLS), np.float32), NamedSharding(mesh16, P(None, "x"))),
                   "e": jax.device_put(rng.standard_normal((64, 32)).astype(np.float32), NamedSharding(mesh8, P("model")))},
        "one": jax.device_put(rng.standard_normal((8,)).astype(np.float32), jax.devices()[3]),
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
    assert arrays["one"].devices == 1 and arrays["one"].mesh is None and arrays["one"].saved_on == "device cpu:3"
    assert arrays["step"].saved_on == "host (NumPy)" and w.saved_on == "x 16"
    assert info.layout == ("zarr" if where == "zarr" else "ocdbt")
    # the bytes come from the files, not from the shapes: random floats keep their size, zeros shrink
    assert 0.85 * w.nbytes < w.stored_bytes < 1.1 * w.nbytes, (w.stored_bytes, w.nbytes)
    assert arrays["params/zeros"].stored_bytes < 0.05 * w.nbytes


def test_zarr_bytes_are_the_chunk_files_sizes(saved):
    root, _ = saved
    w = _as_saved(inspect_checkpoint(root / "zarr"))["params/w"]
    folder = root / "zarr" / w.storage_key
    files = [p for p in folder.iterdir() if not p.name.startswith(".")]
    assert w.chunks == len(files) and w.stored_bytes == sum(p.stat().st_size for p in files)


def test_ocdbt_bytes_add_up_to_the_data_files(saved):
    """Every chunk's length in the B+tree, over all arrays, against the data files on disk: the data
    files also hold the tree's nodes, so the chunks are at most their size, and nearly all of it."""
    root, _ = saved
    info = inspect_checkpoint(root / "ocdbt")
    data_files = sum(p.stat().st_size for p in (root / "ocdbt").rglob("d/*") if p.is_file())
    assert info.stored_bytes <= data_files and info.stored_bytes > 0.9 * data_files, (info.stored_bytes, data_files)
    # large chunks in the writing process's files; small ones inline in the tree's nodes
    assert set(info.per_writer()) == {"ocdbt.process_0", "inline in the B+tree"}, info.per_writer()
    assert info.per_writer()["ocdbt.process_0"] > 0.9 * info.stored_bytes


def test_inline_chunks_are_said_as_encoded_beside_the_tree_s_own_bytes_on_disk(tmp_path):
    """Chunks of at most 1 KiB sit in the B+tree's nodes, which OCDBT compresses: their encoded
    bytes are not bytes on disk. The table says what they are, and the nodes' own size, which is
    the tree's file in the checkpoint's d/ folder."""
    tree = {f"layer_{i:02d}": {"w": np.full((4, 4), i, np.float32)} for i in range(40)}
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "tiny", tree)
    checkpointer.wait_until_finished()
    info = inspect_checkpoint(tmp_path / "tiny")
    assert set(info.per_writer()) == {"inline in the B+tree"}
    tree_file = sum(p.stat().st_size for p in (tmp_path / "tiny" / "d").iterdir())
    assert info.tree_bytes == tree_file, (info.tree_bytes, tree_file)
    line = info.table().splitlines()[-1]
    assert "before the tree's compression" in line and f"its nodes take {human(tree_file)} on disk" in line, line
    assert "(on disk)" not in line and "on disk" not in info.table().splitlines()[1]  # the column: "stored"


def test_a_manager_root_reads_its_newest_committed_step_and_names_the_unfinished_one(saved, capsys):
    from ckptlab.tool.cli import main

    root, _ = saved
    info = inspect_checkpoint(root / "manager")
    assert info.step == 20 and info.path == root / "manager" / "20" / "default"
    assert info.pending == ["30.orbax-checkpoint-tmp-1234"] and "30.orbax-checkpoint-tmp-1234" in info.table()
    assert inspect_checkpoint(root / "manager", step=10).step == 10
    assert locate(root / "manager" / "10")[0] == root / "manager" / "10" / "default"
    # --json says what the table says: the pending steps too
    assert main(["inspect", "--json", str(root / "manager")]) == 0
    assert json.loads(capsys.readouterr().out)["pending"] == ["30.orbax-checkpoint-tmp-1234"]


def test_the_tool_logs_no_step_metadata_warning_and_leaves_absl_as_it_was(saved, capsys):
    """Orbax warns through absl on every read of a manager step's item (its _CHECKPOINT_METADATA is in
    the step's folder, not the item's): the tool's own runs drop that one record, nothing else, and
    put absl's logger back as it was."""
    import logging

    from ckptlab.tool.cli import main

    root, _ = saved
    absl = logging.getLogger("absl")
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    keep, level, filters = Keep(), absl.level, list(absl.filters)
    absl.addHandler(keep)
    absl.setLevel(logging.WARNING)
    try:
        inspect_checkpoint(root / "manager")  # the control: Orbax, called directly, warns
        assert any(m.endswith("/20/default/_CHECKPOINT_METADATA") for m in seen), seen
        seen.clear()
        assert main(["inspect", str(root / "manager")]) == 0 and main(["diff", str(root / "manager"),
                                                                        str(root / "manager")]) == 0
        assert not [m for m in seen if "_CHECKPOINT_METADATA" in m], seen
        absl.warning("another warning")  # not this one: still said
        assert seen == ["another warning"] and absl.filters == filters
    finally:
        absl.removeHandler(keep)
        absl.setLevel(level)
    capsys.readouterr()


def test_rows_are_in_natural_order_in_inspect_plan_and_diff(tmp_path, capsys):
    """layers_2 before layers_10 (as text, layers_10 sorts first), in each command's rows."""
    from ckptlab.tool.cli import main
    from ckptlab.tool.diffing import diff_checkpoints
    from ckptlab.tool.planning import plan_restore

    tree = {f"layers_{i}": {"w": np.full((4,), i, np.float32)} for i in (10, 2, 1)}
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(tmp_path / "a", tree)
        checkpointer.save(tmp_path / "b", {k: {"w": v["w"] + 1} for k, v in tree.items()})
        checkpointer.save(tmp_path / "none", {"other": np.zeros(1, np.float32)})
    natural = ["layers_1/w", "layers_2/w", "layers_10/w"]
    assert [a.path for a in inspect_checkpoint(tmp_path / "a").arrays] == natural
    assert main(["inspect", str(tmp_path / "a")]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("layers_")]
    assert rows == natural, rows
    assert [a.path for a in plan_restore(tmp_path / "a", {"x": 16}).arrays] == natural
    assert main(["plan", str(tmp_path / "a"), "--mesh", "x=16"]) == 0
    out = capsys.readouterr().out
    assert [out.index(f"  {p} (") for p in natural] == sorted(out.index(f"  {p} (") for p in natural), out
    assert list(diff_checkpoints(tmp_path / "a", tmp_path / "b").values) == natural
    assert diff_checkpoints(tmp_path / "a", tmp_path / "none").missing == natural
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert [out.index(f"values differ: {p} ") for p in natural] == sorted(out.index(f"values differ: {p} ")
                                                                          for p in natural), out


def test_a_safetensors_file_is_told_what_the_tool_can_do_with_it(saved, tmp_path, capsys):
    from safetensors.numpy import save_file

    from ckptlab.tool.cli import main

    root, _ = saved
    save_file({"w": np.ones((2, 2), np.float32), "b": np.zeros(2, np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "renamed.bin").write_bytes((tmp_path / "model.safetensors").read_bytes())
    for name in ("model.safetensors", "renamed.bin"):  # told by its header, whatever its name
        assert main(["inspect", str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert f"{tmp_path / name} is a safetensors file of 2 tensor(s), not an Orbax checkpoint" in err, err
        assert "ckptlab.serving.convert_safetensors(path, out_dir, rename, mesh, specs)" in err and "pass out_dir" in err
    with pytest.raises(NotACheckpoint, match="pass the checkpoint's folder, the one holding _METADATA"):
        inspect_checkpoint(root / "ocdbt" / "_METADATA")


def _tree_of(step):
    return {"w": np.full((8, 4), step, np.float32)}


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """Roots whose steps Orbax names otherwise: a prefix and a fixed length, a prefix alone; and a
    folder of plain saves (1, 2) beside a save to 3 that a kill left unfinished."""
    top = tmp_path_factory.mktemp("roots")
    for name, options in (("prefixed", {"step_prefix": "ckpt", "step_format_fixed_length": 6}),
                          ("step_named", {"step_prefix": "step"})):
        manager = ocp.CheckpointManager(top / name, options=ocp.CheckpointManagerOptions(**options))
        for step in (5, 100):
            manager.save(step, args=ocp.args.StandardSave(_tree_of(step)))
        manager.wait_until_finished()
        manager.close()
    checkpointer = ocp.StandardCheckpointer()
    for step in (1, 2):
        checkpointer.save(top / "plain" / str(step), _tree_of(step))
        checkpointer.wait_until_finished()
    shutil.copytree(top / "plain" / "2", top / "plain" / "3.orbax-checkpoint-tmp")  # what the kill leaves
    (top / "9.orbax-checkpoint-tmp").mkdir()  # the folder above's own: not the root's
    return top


def test_steps_named_with_orbax_s_options_are_read_and_shown(roots):
    assert sorted(p.name for p in (roots / "prefixed").iterdir()) == ["ckpt_000005", "ckpt_000100"]
    for name, folder in (("prefixed", "ckpt_000100"), ("step_named", "step_100")):
        info = inspect_checkpoint(roots / name)
        assert info.step == 100 and info.path == roots / name / folder / "default", info.path
        assert "step 100" in info.table().splitlines()[0]
        assert inspect_checkpoint(roots / name, step=5).step == 5
    with pytest.raises(NotACheckpoint, match=r"no step 7; its steps: \[5, 100\]"):
        inspect_checkpoint(roots / "prefixed", step=7)


def test_a_folder_of_plain_saves_lists_its_own_pending_steps(roots):
    info = inspect_checkpoint(roots / "plain")
    assert info.step == 2 and info.path == roots / "plain" / "2"
    assert info.pending == ["3.orbax-checkpoint-tmp"], info.pending


def test_a_relative_path_reads_as_its_absolute_one(saved, monkeypatch, capsys):
    """Orbax's metadata() reads nothing from a relative path (its item metadata is None)."""
    from ckptlab.tool.cli import main

    root, _ = saved
    monkeypatch.chdir(root)
    for where in ("ocdbt", "manager", "v1"):
        info = inspect_checkpoint(where)
        assert info.path.is_absolute() and len(info.arrays) == 5, where
    assert main(["inspect", "ocdbt"]) == 0 and "params/w" in capsys.readouterr().out


def test_keys_holding_a_slash_stay_apart_from_the_nested_path(tmp_path):
    checkpointer = ocp.StandardCheckpointer()
    checkpointer.save(tmp_path / "keys", {"x/y": np.ones(1, np.float32), "x": {"y": np.zeros(2, np.float32)}})
    checkpointer.wait_until_finished()
    info = inspect_checkpoint(tmp_path / "keys")
    arrays = {a.keys: a for a in info.arrays}
    assert set(arrays) == {("x/y",), ("x", "y")} and arrays[("x", "y")].shape == (2,)
    assert {a.path for a in info.arrays} == {'"x/y"', "x/y"}  # printed apart: the key holding "/" quoted
    assert all(a.chunks == 1 for a in info.arrays)


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """A v1 partial save: two partial.save calls, not finalized (yet); chunks of 2 KiB, in data files."""
    from orbax.checkpoint import v1 as ocp_v1

    path = tmp_path_factory.mktemp("partial") / "ckpt"
    rng = np.random.default_rng(1)
    mesh = course_mesh({"x": 16})
    for name in ("layer1", "layer2"):
        ocp_v1.partial.save(path, {name: {"w": jax.device_put(rng.standard_normal((256, 32)).astype(np.float32),
                                                             NamedSharding(mesh, P("x")))}})
    return path


def test_a_partial_save_never_finalized_says_to_finalize_it(partial, capsys):
    from ckptlab.tool.cli import main

    pending = next((partial.parent / (partial.name + ".partial_save")).iterdir())
    for path in (partial, partial.parent / (partial.name + ".partial_save"), pending, pending / "state"):
        with pytest.raises(NotACheckpoint, match="partial save never finalized") as refused:
            inspect_checkpoint(path)
        assert f"orbax.checkpoint.v1.partial.finalize('{partial}')" in str(refused.value), str(refused.value)
    assert main(["inspect", str(partial)]) == 2 and "finalize(" in capsys.readouterr().err


def test_the_writer_column_names_a_partial_save_s_writer_folders_whole(partial):
    from orbax.checkpoint import v1 as ocp_v1

    ocp_v1.partial.finalize(partial)
    info = inspect_checkpoint(partial)
    folders = {p.name for p in info.path.glob("ocdbt.process_*")}
    writers = set(info.per_writer()) - {"inline in the B+tree"}
    assert writers and writers <= folders and all(len(w) > len("ocdbt.process_0") for w in writers), (writers, folders)


def test_refusals_say_what_to_pass(saved, tmp_path):
    root, _ = saved
    (tmp_path / "empty").mkdir()
    (tmp_path / "unknown").mkdir()
    (tmp_path / "unknown" / "_METADATA").write_text("not Orbax's")
    cases = {tmp_path / "missing": "does not exist", root / "ocdbt" / "_METADATA": "is a file",
             root / "manager" / "30.orbax-checkpoint-tmp-1234": "still being written",
             tmp_path / "empty": "is not an Orbax checkpoint",
             tmp_path / "unknown": "_METADATA is damaged"}
    for path, said in cases.items():
        with pytest.raises(NotACheckpoint, match=said):
            inspect_checkpoint(path)
    with pytest.raises(NotACheckpoint, match=r"no step 5; its steps: \[10, 20\]"):
        inspect_checkpoint(root / "manager", step=5)


def _copy(source, where):
    shutil.copytree(source, where)
    return where


def test_a_damaged_checkpoint_says_what_is_missing_and_what_to_do(saved, tmp_path, capsys):
    from ckptlab.tool.cli import main

    root, _ = saved
    garbage = _copy(root / "ocdbt", tmp_path / "garbage")
    (garbage / "_METADATA").write_text("garbage{")
    no_manifest = _copy(root / "ocdbt", tmp_path / "no_manifest")
    (no_manifest / "manifest.ocdbt").unlink()
    no_metadata = _copy(root / "ocdbt", tmp_path / "no_metadata")
    (no_metadata / "_METADATA").unlink()
    no_tree = _copy(root / "ocdbt", tmp_path / "no_tree")
    shutil.rmtree(no_tree / "d")
    cases = {garbage: "_METADATA is damaged", no_manifest: "manifest.ocdbt is missing",
             no_metadata: "has no _METADATA", no_tree: "its OCDBT database cannot be read"}
    for path, said in cases.items():
        with pytest.raises(NotACheckpoint, match=said) as refused:
            inspect_checkpoint(path)
        assert "Restore the folder from a copy" in str(refused.value) and "not an Orbax" not in str(refused.value)
    # a manager root whose newest step is damaged: the older steps named, and how to ask for one
    manager = _copy(root / "manager", tmp_path / "manager")
    (manager / "20" / "default" / "_METADATA").unlink()
    with pytest.raises(NotACheckpoint, match=r"20/default has no _METADATA.*older steps: 10 \(pass --step 10"):
        inspect_checkpoint(manager)
    (manager / "20" / "default" / "manifest.ocdbt").unlink()
    (manager / "20" / "default" / "_METADATA").write_text("{}")
    assert main(["inspect", str(manager)]) == 2
    err = capsys.readouterr().err
    assert "_METADATA is damaged" in err and "--step 10" in err and "Traceback" not in err
    assert inspect_checkpoint(manager, step=10).step == 10


def test_the_command_prints_the_table_and_json_and_exits_2_on_a_bad_path(saved, tmp_path, capsys):
    from ckptlab.tool.cli import main

    root, _ = saved
    assert main(["inspect", str(root / "ocdbt")]) == 0
    out = capsys.readouterr().out
    assert "params/w" in out and "P('x')" in out and "device cpu:3" in out and "host (NumPy)" in out
    assert "stored, by where: inline in the B+tree" in out and "; ocdbt.process_0 " in out
    assert main(["inspect", "--json", str(root / "manager")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == 20 and {a["path"] for a in report["arrays"]} >= {"params/w", "params/e"}
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not an Orbax checkpoint" in err and len(err.splitlines()) == 1


def test_a_placement_figure_per_array_on_request(saved, tmp_path, capsys, monkeypatch):
    from ckptlab import plotting
    from ckptlab.tool.cli import main

    root, _ = saved
    out = tmp_path / "w.png"
    # as a learner types it: python -m ckptlab, in a fresh process, whose JAX has not started yet
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_PLATFORMS": "cpu"}
    drawn = subprocess.run([sys.executable, "-m", "ckptlab", "inspect", str(root / "ocdbt"), "--figure", "params/e",
                            "--out", str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert drawn.returncode == 0 and "Traceback" not in drawn.stderr, drawn.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert main(["inspect", str(root / "ocdbt"), "--figure", "params/nope"]) == 2
    assert "no array 'params/nope'" in capsys.readouterr().err
    titles = []
    monkeypatch.setattr(plotting, "plot_sharded_array", lambda *a, **kw: titles.append(kw["title"]))
    assert main(["inspect", str(root / "ocdbt"), "--figure", "one", "--out", str(tmp_path / "f.png")]) == 0
    assert "saved on device cpu:3" in titles[0], titles  # where it was, not "device 1"
