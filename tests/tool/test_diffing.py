"""``ckptlab.tool.diffing`` (``python -m ckptlab diff``): each planted difference found and nothing else,
on checkpoints saved for real (strings beside the arrays, a leaf that changed kind, keys holding a
"/", complex values, NaNs); block by block, so its memory stays flat in the checkpoints' size
(measured by the kernel in fresh processes, beside a whole-array read that grows: the control)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from ckptlab.layout import course_mesh
from ckptlab.tool.diffing import blocks, diff_checkpoints

MiB = 2**20


def _model(w=None, spec=None, **changes):
    mesh = course_mesh({"x": 16})
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 256)).astype(np.float32) if w is None else w
    special = np.array([np.nan, np.inf, -np.inf, 0.0, 1e-12, 3.0] * 8, np.float32)
    tree = {"params": {"w": jax.device_put(w, NamedSharding(mesh, P("x") if spec is None else spec)),
                       "special": jax.device_put(special, NamedSharding(mesh, P("x")))},
            "count": np.array([2**53 + 2, 5], np.int64)}
    for path, value in changes.items():
        where = tree
        *parents, last = path.split("__")
        for p in parents:
            where = where[p]
        if value is None:
            del where[last]
        else:
            where[last] = value
    return tree, w


def _save(path, tree, ocdbt=True):
    with ocp.PyTreeCheckpointer(use_ocdbt=ocdbt) as checkpointer:
        checkpointer.save(path, tree)
    return path


def _save_v1(path, tree):  # Orbax's v1 API: OCDBT with zarr 3 (v0's default is zarr 2)
    from orbax.checkpoint import v1 as ocp_v1

    ocp_v1.save(path, tree)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    tree, w = _model()
    a = _save(root / "a", tree)
    changed = w.copy()
    changed[500, 7] += 0.5  # one element, in the last block of a small block size
    mesh = course_mesh({"x": 16})
    made = {
        "copy": _save(root / "copy", tree),
        "copy_zarr": _save(root / "copy_zarr", tree, ocdbt=False),
        "copy_v1": _save_v1(root / "copy_v1", tree),
        "one_element_v1": _save_v1(root / "one_v1", _model(w=changed)[0]),
        "one_element": _save(root / "one", _model(w=changed)[0]),
        "renamed": _save(root / "renamed", _model(params__w=None, params__kernel=tree["params"]["w"])[0]),
        "reshaped": _save(root / "reshaped", _model(params__w=jax.device_put(w.reshape(256, 512), NamedSharding(mesh, P("x"))))[0]),
        "bf16": _save(root / "bf16", _model(params__w=tree["params"]["w"].astype(jnp.bfloat16))[0]),
        "resharded": _save(root / "resharded", _model(spec=P(None, "x"))[0]),
        "counter": _save(root / "counter", _model(count=np.array([2**53 + 3, 5], np.int64))[0]),
    }
    return a, made


def test_the_same_model_is_the_same_whatever_its_layout(pair):
    a, made = pair
    for name in ("copy", "copy_zarr", "copy_v1"):
        report = diff_checkpoints(a, made[name])
        assert report.same and report.compared == 3, (name, report.text())
        assert not (report.values or report.sharding or report.dtype)


def test_one_changed_element_is_found_block_by_block(pair):
    a, made = pair
    for block_bytes in (4096, 64 * MiB):  # many blocks, and one
        report = diff_checkpoints(a, made["one_element"], block_bytes=block_bytes)
        assert report.values == {"params/w": {"elements": 1, "max_abs": pytest.approx(0.5, rel=1e-5), "nan": 0}}
        assert not (report.missing or report.extra or report.shape or report.dtype or report.sharding)
    # +0.5 on a value of N(0, 1): beyond 10% of the larger of the two
    assert diff_checkpoints(a, made["one_element"], rtol=0.1).values["params/w"]["elements"] == 1
    # between two checkpoints Orbax's v1 API wrote (zarr 3 inside OCDBT), as between v0's
    v1 = diff_checkpoints(made["copy_v1"], made["one_element_v1"])
    assert list(v1.values) == ["params/w"] and v1.values["params/w"]["elements"] == 1, v1.text()


def test_a_difference_is_located_the_first_index_the_count_and_the_values_there(tmp_path, capsys):
    """Three elements changed, in chunks that split the columns: the chunk grid's first chunk holds
    (37, 2) and (60, 0), a later one (2, 13), the first in row-major order; block by block or whole."""
    from ckptlab.tool.cli import main

    mesh = course_mesh({"x": 4})
    w = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    v = w.copy()
    v[37, 2], v[2, 13], v[60, 0] = -1.5, np.nan, v[60, 0] + 0.25
    a = _save(tmp_path / "a", {"w": jax.device_put(w, NamedSharding(mesh, P(None, "x")))})
    b = _save(tmp_path / "b", {"w": jax.device_put(v, NamedSharding(mesh, P(None, "x")))})
    for block_bytes in (64, 64 * MiB):
        report = diff_checkpoints(a, b, block_bytes=block_bytes)
        assert report.values["w"]["elements"] == 3 and report.first["w"] == {"index": (2, 13), "a": "45.0", "b": "nan"}
    assert "values differ: w (3 element(s), first at (2, 13): 45.0 in a, nan in b, largest difference 596, 1 of them a NaN" in \
        report.text(), report.text()
    assert main(["diff", "--json", str(a), str(b)]) == 1
    said = json.loads(capsys.readouterr().out)["values"]["w"]
    assert said["elements"] == 3 and said["first"] == {"index": [2, 13], "a": "45.0", "b": "nan"}
    # a one-dimensional leaf, a value changed in the last place float32 keeps: told apart, whole digits
    x = np.linspace(0, 1, 8, dtype=np.float32)
    y = x.copy()
    y[5] = np.nextafter(y[5], np.float32(2))
    c, d = _save(tmp_path / "c", {"x": x}), _save(tmp_path / "d", {"x": y})
    assert diff_checkpoints(c, d).first["x"] == {"index": (5,), "a": str(x[5]), "b": str(y[5])} and str(x[5]) != str(y[5])


@pytest.mark.parametrize(("name", "found"), [
    ("renamed", {"missing": ["params/w"], "extra": ["params/kernel"]}),
    ("reshaped", {"shape": ["params/w"]}),
    ("bf16", {"dtype": ["params/w"]}),
    ("counter", {"values": ["count"]}),
])
def test_each_planted_difference_is_found_and_nothing_else(pair, name, found):
    a, made = pair
    report = diff_checkpoints(a, made[name]).as_dict()
    for kind in ("missing", "extra", "shape", "dtype", "sharding", "values"):
        assert sorted(report[kind]) == sorted(found.get(kind, [])), (name, kind, report)
    assert not report["same"]


def test_a_tolerance_accepts_a_cast_and_still_finds_a_change(pair):
    a, made = pair
    cast = diff_checkpoints(a, made["bf16"], rtol=1e-2)
    assert cast.same and cast.dtype == ["params/w"] and not cast.values, cast.text()
    assert not diff_checkpoints(a, made["bf16"], rtol=1e-4).same  # bfloat16 keeps 8 bits: beyond 1e-4
    # integers exactly, even where float64 cannot tell them apart (2^53 + 2 and + 3)
    assert diff_checkpoints(a, made["counter"], rtol=0.5).values == {"count": {"elements": 1, "max_abs": 1.0, "nan": 0}}
    # NaN, infinities, 1e-12 compared with themselves: the same, at any tolerance
    assert diff_checkpoints(a, made["copy"], rtol=0.1).same


def test_another_sharding_is_reported_and_the_values_still_compared(pair):
    a, made = pair
    calls = []
    report = diff_checkpoints(a, made["resharded"], progress=lambda *c: calls.append(c))
    assert [c[0] for c in calls] == [0, 1, 2, 3] and calls[0][1] == 3  # progress: each leaf, then done
    assert report.sharding == ["params/w"] and report.same and report.compared == 3


@pytest.mark.parametrize("shape", [(), (7,), (33, 5), (4, 3, 1000), (0, 4)])
def test_blocks_cover_every_element_once_within_the_bound(shape):
    seen = np.zeros(shape, np.int32)
    for index in blocks(shape, 4, block_bytes=256):
        part = seen[index]
        assert part.size * 4 <= 256 or part.size == 1
        seen[index] += 1
    assert np.all(seen == 1)
    seen[...] = 0
    chunks = tuple(max(1, n // 3) for n in shape)  # a grid that does not divide the shape
    for index in blocks(shape, 4, block_bytes=256, chunk_shape=chunks):
        assert all(s.start // c == (s.stop - 1) // c for s, c in zip(index, chunks) if s.stop > s.start)
        part = seen[index]
        assert part.size * 4 <= 256 or part.size == 1
        seen[index] += 1
    assert np.all(seen == 1)


def test_the_command_exits_0_when_the_same_1_when_not_2_on_a_bad_path(pair, tmp_path, capsys):
    from ckptlab.tool.cli import main

    a, made = pair
    assert main(["diff", str(a), str(made["copy"])]) == 0 and "the same model" in capsys.readouterr().out
    assert main(["diff", "--json", str(a), str(made["bf16"])]) == 1
    assert json.loads(capsys.readouterr().out)["dtype"] == ["params/w"]
    assert main(["diff", str(a), str(tmp_path)]) == 2 and "not an Orbax checkpoint" in capsys.readouterr().err
    assert main(["diff", "--rtol", "-1", str(a), str(a)]) == 2 and "rtol" in capsys.readouterr().err


def _pytree(path, tree):  # PyTreeCheckpointHandler: strings too (kept in _strings.json, not as arrays)
    ocp.Checkpointer(ocp.PyTreeCheckpointHandler()).save(path, args=ocp.args.PyTreeSave(tree))
    return path


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd")
    w = np.arange(6, dtype=np.float32)

    def tree(**changes):
        return {"w": w, "name": "run-a", "n": 3, **changes}

    return {"a": _pytree(root / "a", tree()), "copy": _pytree(root / "copy", tree()),
            "renamed_run": _pytree(root / "renamed_run", tree(name="run-b")),
            "n_changed": _pytree(root / "n_changed", tree(n=4)),
            "name_an_array": _pytree(root / "name_an_array", tree(name=np.arange(2, dtype=np.int32))),
            "slash_a": _pytree(root / "slash_a", {"x/y": np.ones(1, np.float32), "x": {"y": np.zeros(1, np.float32)}}),
            "slash_b": _pytree(root / "slash_b", {"x/y": np.ones(1, np.float32), "x": {"y": np.full(1, 5, np.float32)}}),
            "c_a": _pytree(root / "c_a", {"c": np.array([1 + 1j, 2 + 2j], np.complex64), "f": np.ones(3, np.float32)}),
            "c_b": _pytree(root / "c_b", {"c": np.array([1 + 1j, 2 + 3j], np.complex64),
                                          "f": np.array([1, np.nan, 1], np.float32)})}


def test_leaves_that_are_not_arrays_are_compared_by_value(odd):
    same = diff_checkpoints(odd["a"], odd["copy"])
    assert same.same and same.not_arrays == ["name"] and same.compared == 3 and same.leaves == (3, 3), same.text()
    changed = diff_checkpoints(odd["a"], odd["renamed_run"])
    assert not changed.same and changed.values == {"name": {"a": "run-a", "b": "run-b"}}, changed.text()
    assert "values differ: name ('run-a' in a, 'run-b' in b)" in changed.text()
    assert list(diff_checkpoints(odd["a"], odd["n_changed"]).values) == ["n"]  # a Python int: an array to Orbax


def test_a_leaf_that_changed_kind_is_a_difference(odd, capsys):
    from ckptlab.tool.cli import main

    report = diff_checkpoints(odd["a"], odd["name_an_array"])
    assert not report.same and report.kind == {"name": {"a": "a string", "b": "an array int32 (2,)"}}, report.text()
    assert not (report.missing or report.extra) and report.compared == 2
    assert "another kind: name (a string in a, an array int32 (2,) in b)" in report.text()
    # --json accounts for every leaf too: the ones that are not arrays among them
    assert main(["diff", "--json", str(odd["a"]), str(odd["renamed_run"])]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["not_arrays"] == ["name"] and out["values"] == {"name": {"a": "run-a", "b": "run-b"}}
    assert out["leaves"] == {"a": 3, "b": 3} and out["compared"] == 3


def test_a_key_holding_a_slash_is_not_merged_with_the_nested_path(odd):
    report = diff_checkpoints(odd["slash_a"], odd["slash_b"])
    assert list(report.values) == ["x/y"] and report.compared == 2, report.text()  # the nested one, not '"x/y"'
    assert report.values["x/y"]["max_abs"] == 5


def test_complex_values_compare_as_complex_and_a_nan_is_said(odd):
    exact = diff_checkpoints(odd["c_a"], odd["c_b"])
    assert exact.values["c"] == {"elements": 1, "max_abs": 1.0, "nan": 0}, exact.text()  # the imaginary part
    assert exact.values["f"] == {"elements": 1, "max_abs": None, "nan": 1}
    assert ("values differ: f (1 element(s), first at (1,): 1.0 in a, nan in b, largest difference NaN: a NaN against "
            "a number)") in exact.text()
    # |(2+3j) - (2+2j)| = 1 against max(|2+3j|, |2+2j|) = 3.6: beyond 10%, within 30%
    assert diff_checkpoints(odd["c_a"], odd["c_b"], rtol=0.1).values["c"]["elements"] == 1
    assert "c" not in diff_checkpoints(odd["c_a"], odd["c_b"], rtol=0.3).values


def test_relative_paths_read_as_their_absolute_ones(odd, monkeypatch):
    monkeypatch.chdir(odd["a"].parent)
    report = diff_checkpoints("a", "renamed_run")
    assert report.a == str(odd["a"]) and list(report.values) == ["name"], report.text()


_MEASURE = textwrap.dedent(r"""
    import json, sys
    from ckptlab import setup_devices
    setup_devices(1)
    import numpy as np, tensorstore as ts
    from ckptlab.tool.diffing import diff_checkpoints
    from ckptlab.tool.inspection import inspect_checkpoint
    from ckptlab.memory import status_bytes
    a, b, how = sys.argv[1:]
    diff_checkpoints(a, b, block_bytes=1 << 20)  # warm-up: what a first call loads once
    before = status_bytes("VmRSS")
    if how == "blocks":
        report = diff_checkpoints(a, b, block_bytes=1 << 20)
        assert report.same
    else:  # the control: each leaf read whole, both checkpoints' at once
        held = []
        for path in (a, b):
            info = inspect_checkpoint(path)
            for x in info.arrays:
                spec = {"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": f"file://{info.path}/", "path": x.storage_key + "/"}}
                held.append(ts.open(spec, open=True).result().read().result())
    print(json.dumps({"grew": status_bytes("VmHWM") - before}))
""")


@pytest.mark.slow
def test_memory_stays_flat_in_the_checkpoints_size(tmp_path):
    """Checkpoints of 8 and 32 MiB of random float32 (incompressible: the bytes read are the bytes
    kept), in leaves of 4 MiB saved by 16 devices (256 KiB chunks): the block-by-block diff grows by
    about the same either way; reading whole arrays (the control) grows by both checkpoints' values."""
    rng = np.random.default_rng(1)
    mesh = course_mesh({"x": 16})
    grew = {}
    for mib in (8, 32):
        tree = {f"w{i}": jax.device_put(rng.standard_normal((1024, 1024)).astype(np.float32), NamedSharding(mesh, P("x")))
                for i in range(mib // 4)}
        a, b = _save(tmp_path / f"a{mib}", tree), _save(tmp_path / f"b{mib}", tree)
        for how in ("blocks", "whole"):
            out = subprocess.run([sys.executable, "-c", _MEASURE, str(a), str(b), how], capture_output=True, text=True,
                                 timeout=300, env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
            assert out.returncode == 0, out.stderr[-2000:]
            grew[(mib, how)] = json.loads(out.stdout.strip().splitlines()[-1])["grew"]
    assert grew[(32, "whole")] - grew[(8, "whole")] > 2 * 20 * MiB, grew  # the control saw the size
    assert abs(grew[(32, "blocks")] - grew[(8, "blocks")]) < 4 * MiB, grew
    assert grew[(32, "blocks")] < 8 * MiB, grew
