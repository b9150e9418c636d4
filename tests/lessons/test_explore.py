"""The shard-placement explorer: its numbers against the course's references, real Orbax saves and
real TensorStore reads; its errors are JAX's own words; and in a real kernel, changing a widget
redraws the figure and the numbers."""

from __future__ import annotations

import json
import math
import re

import jax.numpy as jnp
import nbformat
import pytest
from nbclient import NotebookClient

from ckptlab import explore as ex
from solutions import unit2, unit3

CHOICES = [  # (shape, dtype, mesh, spec): replicas split or not, 1-D and 2-D, tuple axes, no replicas
    ((64, 32), "float32", {"x": 4, "y": 2}, ("x", None)),
    ((64, 32), "bfloat16", {"x": 4, "y": 2}, ("x", "y")),
    ((64, 32), "int8", {"x": 4, "y": 2}, (None, "y")),
    ((12, 6), "float32", {"x": 4, "y": 2}, ("x", None)),      # shard (3, 6): replicas split the second axis
    ((63,), "float32", {"x": 8}, ()),                          # replicated, no divisible axis: one writer
    ((32,), "float16", {"x": 8}, ()),                          # replicated, split 8 ways
    ((16, 16), "float32", {"x": 2, "y": 2, "z": 4}, (("x", "y"), "z")),
    ((48, 8), "float8_e4m3fn", {"x": 16}, ("x",)),
]
TARGETS = [({"x": 16}, ("x",)), ({"x": 16}, (None, "x")), ({"x": 4, "y": 4}, ("x", "y")), ({"x": 16}, ())]


@pytest.mark.parametrize("shape,dtype,mesh,spec", CHOICES)
@pytest.mark.parametrize("replica_parallel", [True, False])
def test_placement_equals_the_references(shape, dtype, mesh, spec, replica_parallel):
    itemsize = jnp.dtype(dtype).itemsize
    got = ex.placement(shape, dtype, mesh, spec, devices_per_host=4, replica_parallel=replica_parallel)
    assert got["shard_shape"] == unit2.shard_shape(shape, mesh, spec)
    assert got["domains"] == unit2.device_index_domains(shape, mesh, spec)
    assert got["chunk_shape"] == unit2.orbax_chunk_shape(shape, mesh, spec, replica_parallel)
    assert sorted(got["chunk_files"]) == unit2.chunk_files(shape, got["chunk_shape"])
    assert got["bytes_per_device"] == unit2.bytes_written_per_device(shape, itemsize, mesh, spec, replica_parallel)
    assert got["bytes_per_host"] == unit2.bytes_written_per_host(shape, itemsize, mesh, spec, 4, replica_parallel)
    assert got["bytes_written"] == got["array_bytes"] == math.prod(shape) * itemsize
    # each chunk file has exactly one writer, and each writer writes exactly the chunk it is named for
    assert len(set(got["chunk_files"].values())) == len(got["chunk_files"])


@pytest.mark.parametrize("shape,dtype,mesh,spec", CHOICES[:6])
def test_save_for_real_writes_the_predicted_files(tmp_path, shape, dtype, mesh, spec):
    predicted = ex.placement(shape, dtype, mesh, spec)
    real = ex.save_for_real(shape, dtype, mesh, spec, directory=tmp_path)
    assert real["chunks"] == predicted["chunk_shape"]
    assert sorted(real["files"]) == sorted(predicted["chunk_files"])
    chunk_bytes = math.prod(predicted["chunk_shape"]) * jnp.dtype(dtype).itemsize
    assert set(real["files"].values()) == {chunk_bytes}


@pytest.mark.parametrize("mesh,spec", TARGETS)
def test_restore_reads_equal_the_references_and_tensorstore(tmp_path, mesh, spec):
    import numpy as np
    import tensorstore as ts

    shape, chunk = (64, 32), (8, 32)
    got = ex.restore_reads(shape, chunk, mesh, spec, 4)
    assert got["chunks_read"] == unit3.chunks_to_read(shape, chunk, mesh, spec)
    assert got["read_amplification"] == pytest.approx(unit3.read_amplification(shape, chunk, mesh, spec, 4))
    assert got["no_sharing_amplification"] == pytest.approx(unit3.read_amplification(shape, chunk, mesh, spec, 1))
    # and what TensorStore really reads, one target device at a time, cache off
    meta = {"shape": list(shape), "chunks": list(chunk), "dtype": "<f4", "compressor": None}
    spec_ts = {"driver": "zarr", "kvstore": {"driver": "file", "path": str(tmp_path / "w")}}
    ts.open({**spec_ts, "metadata": meta}, create=True).result().write(np.ones(shape, np.float32)).result()
    store = ts.open({**spec_ts, "context": {"cache_pool": {"total_bytes_limit": 0}}}).result()

    def files_read():
        return sum(m["values"][0]["value"] for m in ts.experimental_collect_matching_metrics("/tensorstore/kvstore/file/read")
                   if m["name"] == "/tensorstore/kvstore/file/read")

    for device, domain in got["domains"].items():
        before = files_read()
        store[tuple(slice(a, b) for a, b in domain)].read().result()
        assert files_read() - before == len(got["chunks_read"][device]), device


@pytest.mark.parametrize("mesh,spec,error", [
    ({"x": 3}, ("x",), "IndivisibleError"),
    ({"x": 8}, ("y",), "Resource axis: y"),
    ({"x": 4, "y": 2}, ("x", "x"), "duplicate entries"),
])
def test_an_invalid_choice_raises_jaxs_own_error(mesh, spec, error):
    from jax.sharding import NamedSharding, PartitionSpec

    from ckptlab.layout import course_mesh

    with pytest.raises(Exception) as ours:
        ex.placement((64, 32), "float32", mesh, spec)
    with pytest.raises(Exception) as jax_says:
        NamedSharding(course_mesh(mesh), PartitionSpec(*spec)).shard_shape((64, 32))
    assert str(ours.value) == str(jax_says.value) and error in f"{type(ours.value).__name__}: {ours.value}"


def test_parsing_is_forgiving_and_its_errors_say_what_to_type():
    assert ex.parse_spec("'x', None") == ex.parse_spec("x, None") == ex.parse_spec("P('x', None)") == ("x", None)
    assert ex.parse_spec("(x, y), None") == (("x", "y"), None) and ex.parse_spec("") == ()
    assert ex.parse_mesh("x=4, y=2") == {"x": 4, "y": 2} and ex.parse_shape("(64, 32)") == (64, 32)
    for bad, says in [(lambda: ex.parse_mesh("x=32"), "the course has 16"), (lambda: ex.parse_mesh("x=2, x=2"), "axis=size"),
                      (lambda: ex.parse_shape("a, b"), "e.g. 64, 32"), (lambda: ex.parse_shape("2, 2, 2"), "1-D and 2-D"),
                      (lambda: ex.parse_spec("'x', 3"), "not None, an axis name"), (lambda: ex.parse_spec("x +"), "one entry per")]:
        with pytest.raises(ex.ChoiceError, match=says):
            bad()
    with pytest.raises(ex.ChoiceError, match="MiB"):
        ex.placement((8192, 8192), "float32", {"x": 16}, ())  # 16 real replicas of 256 MiB


KERNEL_CELLS = [
    "from ckptlab import setup_devices\nsetup_devices()",
    "import json\nfrom ckptlab.explore import explore\nex = explore()\nex",
    "def state():\n"
    "    n = ex.numbers\n"
    "    return {'redraws': ex.redraws, 'error': ex.error, 'png': ex.image.value[:8].hex(), 'png_len': len(ex.image.value),\n"
    "            'table': ex.table.value,\n"
    "            'saved': n and {'chunk_shape': n['saved']['chunk_shape'], 'bytes_per_device': n['saved']['bytes_per_device'],\n"
    "                            'bytes_per_host': n['saved']['bytes_per_host'], 'chunk_files': n['saved']['chunk_files']},\n"
    "            'amplification': n and n['target']['read_amplification']}\n"
    "print('STATE', json.dumps(state()))",
    "ex.widgets['spec'].value = \"'x', 'y'\"\nprint('STATE', json.dumps(state()))",
    "ex.widgets['target_spec'].value = \"None, 'x'\"\nprint('STATE', json.dumps(state()))",
    "ex.widgets['shape'].value = '63, 32'\nprint('STATE', json.dumps(state()))",
    "ex.widgets['shape'].value = '64, 32'\nprint('STATE', json.dumps(state()))",
    "print('REAL', json.dumps(ex.save_for_real()['matches']))",
]


@pytest.mark.slow
def test_widget_changes_redraw_in_a_real_kernel(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in KERNEL_CELLS])
    NotebookClient(nb, timeout=300, kernel_name="python3", coalesce_streams=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    lines = [line for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout"
             for line in o.get("text", "").splitlines()]  # (what the cells print: a library's warnings aside)
    states = [json.loads(line.removeprefix("STATE ")) for line in lines if line.startswith("STATE ")]
    first, both_axes, columns, indivisible, back = states
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[1].outputs)
    # every change redraws: a new figure, new numbers, equal to the references
    assert [s["redraws"] for s in states] == [1, 2, 3, 4, 5]
    assert first["png"].startswith("89504e47") and len({s["png_len"] for s in (first, both_axes, columns)}) == 3
    mesh = {"x": 4, "y": 2}
    for state, spec in ((first, ("x", None)), (both_axes, ("x", "y")), (back, ("x", "y"))):
        assert tuple(state["saved"]["chunk_shape"]) == unit2.orbax_chunk_shape((64, 32), mesh, spec)
        assert {int(k): v for k, v in state["saved"]["bytes_per_device"].items()} == \
            unit2.bytes_written_per_device((64, 32), 4, mesh, spec)
        assert {int(k): v for k, v in state["saved"]["bytes_per_host"].items()} == \
            unit2.bytes_written_per_host((64, 32), 4, mesh, spec, 4)
        assert sorted(state["saved"]["chunk_files"]) == unit2.chunk_files((64, 32), tuple(state["saved"]["chunk_shape"]))
    assert first["amplification"] == unit3.read_amplification((64, 32), (8, 32), {"x": 16}, ("x",), 4)
    assert columns["amplification"] == unit3.read_amplification((64, 32), (16, 16), {"x": 16}, (None, "x"), 4)
    assert "bytes read / bytes needed" in first["table"] and "host 1" in first["table"]
    # an impossible choice: JAX's own words instead of a figure, and no stale numbers
    assert indivisible["error"].startswith("IndivisibleError: ") and "dimension size is 63" in indivisible["error"]
    assert indivisible["png_len"] == 0 and indivisible["saved"] == {} and "IndivisibleError" in indivisible["table"]
    assert back["error"] is None and back["png_len"] > 0
    assert lines[-1] == "REAL true"


def test_without_the_set_up_cell_the_explorer_sets_up_devices_or_says_how(root):
    """A fresh kernel that skipped the set-up cell: before JAX starts, the devices are made; after,
    the error says to restart and run the set-up cell. Before: `ValueError: cannot reshape array of
    size 1 into shape (4,2)`."""
    import subprocess
    import sys

    env = {**__import__("os").environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    fresh = subprocess.run([sys.executable, "-c", "from ckptlab.explore import placement\n"
                            "print(len(placement((64, 32), 'float32', {'x': 4, 'y': 2}, ('x',))['bytes_per_device']))"],
                           cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0 and fresh.stdout.strip() == "8", fresh.stderr[-1000:]
    started = subprocess.run([sys.executable, "-c", "import jax; jax.devices()\nfrom ckptlab.explore import placement\n"
                              "placement((64, 32), 'float32', {'x': 4, 'y': 2}, ('x',))"],
                             cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode != 0 and "run the set-up cell" in started.stderr and "reshape" not in started.stderr


def test_the_target_half_says_in_words_what_unit_3_names_read_amplification():
    """Lesson 2 shows the explorer before Unit 3 defines read amplification: the table says what the
    ratio is (bytes read over bytes needed, chunks read whole) and gives the term as Unit 3's."""
    table = ex.explore(shape="64, 32", mesh="x=4, y=2", spec="'x', None", target_mesh="x=16",
                       target_spec="None, 'x'").table.value
    said = re.sub(r"<[^>]+>", "", table)
    assert "bytes read / bytes needed" in said and "reads saved chunks whole" in said, said
    assert said.count("read amplification") == 1 and "Unit 3 calls this ratio the read amplification" in said, said


def test_a_wrong_target_leaves_the_saved_half_drawn_and_says_what_is_wrong():
    """Lesson 2's own suggestion (P(), 63 x 32) under the default target P('x') over 16: the save is
    drawn and its numbers given, and the target's IndivisibleError is shown in place of the
    target's half. Before: the whole figure was hidden behind the target's error."""
    explorer = ex.explore(shape="63, 32", mesh="x=8", spec="", target_mesh="x=16", target_spec="'x'")
    assert explorer.error.startswith("target: IndivisibleError"), explorer.error
    assert explorer.numbers["saved"]["chunk_shape"] and explorer.numbers["target"] is None
    assert bytes(explorer.image.value).startswith(b"\x89PNG") and "IndivisibleError" in explorer.table.value
    assert "shard shape" in explorer.table.value and explorer.status.value == ""
    explorer.widgets["target_spec"].value = "None, 'x'"  # a good target again: both halves
    assert explorer.error is None and explorer.numbers["target"]["read_amplification"] > 0
