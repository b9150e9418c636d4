"""Unit tests of the grader's parts: devices, the plain-data codec, and code extraction."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from autograder.engine import extract
from autograder.wall import codec


def test_sixteen_devices_here():
    import jax

    assert len(jax.devices()) == 16


def test_setup_after_jax_started_says_how_to_recover():
    code = ("import jax; jax.numpy.zeros(1)\n"
            "from ckptlab import setup_devices\n"
            "try:\n    setup_devices()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120).stdout
    assert "DeviceSetupError" in out and "Restart the kernel" in out


@pytest.mark.parametrize("value", [
    1, 2.5, "s", None, True, (1, 2), [1, (2, 3)], {"a": 1}, {(0, 1): [2]}, {1: "x"},
    np.arange(6, dtype=np.int8).reshape(2, 3), np.float32(1.5), np.int64(7),
    np.array([1.0, np.nan, np.inf]), np.zeros((0, 3)), np.array(3.0),
])
def test_codec_round_trip_keeps_exact_types(value):
    back = codec.loads(codec.dumps(value))
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape
        np.testing.assert_array_equal(back, value)
    elif isinstance(value, np.generic):
        assert back.dtype == value.dtype and back == value
    else:
        assert back == value


def test_codec_low_precision_and_jax_arrays():
    import jax.numpy as jnp

    a = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    assert codec.loads(codec.dumps(a)).dtype == a.dtype
    back = codec.loads(codec.dumps(jnp.ones(3)))
    assert isinstance(back, codec.JaxArray) and back.dtype == np.float32


def test_codec_arrays_travel_bit_exact_as_checked_bytes():
    """Arrays cross as their little-endian bytes: every bit kept (NaN payloads, bfloat16, byte
    order), a bool read from raw bytes arrives as 0 or 1, and the receiving side checks sizes
    before decoding a byte."""
    nan_payload = np.array([0x7FC00001, 0x3F800000], dtype=np.uint32).view(np.float32)
    weird_bools = np.frombuffer(bytes([0, 2, 1, 255]), dtype=bool)
    for value in (nan_payload, np.arange(5, dtype=">i4"), np.array([1.5, np.nan], dtype=ml_dtypes.bfloat16),
                  np.arange(24, dtype=np.float16).reshape(2, 3, 4)[:, ::2], weird_bools):
        back = codec.decode(json.loads(codec.dumps(value)), checked=True)
        assert back.shape == value.shape and back.dtype == value.dtype.newbyteorder("=")
        if value.dtype == bool:
            assert back.view(np.uint8).tolist() == [0, 1, 1, 1]
        else:
            assert back.tobytes() == np.ascontiguousarray(value, value.dtype.newbyteorder("=")).tobytes()
    frame = codec.encode(np.zeros(4))
    for bad in ({**frame, "bytes": frame["bytes"] + "AAAA"}, {**frame, "bytes": frame["bytes"][:-4]},
                {**frame, "bytes": "!" * len(frame["bytes"])}, {**frame, "shape": [10**7]}, {**frame, "$array": "object"}):
        with pytest.raises(ValueError):
            codec.decode(bad, checked=True)


def test_codec_refuses_objects():
    class Sneaky:
        def __eq__(self, other):
            return True

    for bad in (Sneaky(), object(), np.array([object()]), {1, 2}, lambda: 1):
        with pytest.raises(codec.EncodeError):
            codec.encode(bad)
    with pytest.raises(ValueError):
        codec.decode({"$pickle": "..."})
    json.loads(codec.dumps({"a": np.ones(2)}))  # plain JSON, no NaN tokens


def _nb(tmp_path, *cells):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    path = tmp_path / "sub.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), str(path))
    return path


def test_extract_keeps_what_the_function_uses_and_drops_top_level_calls(tmp_path):
    path = _nb(tmp_path,
               "%matplotlib inline\n!ls\nimport numpy as np\nimport not_installed_anywhere",
               "SCALE = 2\ndef helper(v):\n    return int(np.int64(v)) * SCALE",
               "def f(x):\n    return helper(x)",
               "train_forever()\nunused = expensive()",
               "def f(x):\n    return helper(x) + 1")
    sub = extract.load_submission(path)
    src = sub.module_source("f")
    assert "import numpy" in src and "SCALE = 2" in src and "def helper" in src
    assert "not_installed_anywhere" not in src  # an unused import is not run
    assert "train_forever" not in src and "expensive" not in src
    assert src.count("def f(") == 1 and "+ 1" in src  # the last definition wins
    ns = {}
    exec(compile(src, "<t>", "exec"), ns)
    assert ns["f"](3) == 7


def test_lines_that_start_like_magics_inside_an_expression_stay_python(tmp_path):
    """A formatter wraps a long comparison or a %-format onto lines that start with `!=` or `%`:
    they are Python, in a .py file and in a cell that also holds a real magic (a right answer to
    7.2 once got 'SyntaxError' for it)."""
    body = ("def f(x):\n    same = (x\n            != (x + 1))\n    label = ('%d'\n             % x)\n"
            "    total = x + \\\n        1\n    return same, label, total\n")
    py = tmp_path / "answer.py"
    py.write_text(body)
    nb = _nb(tmp_path, "%matplotlib inline\n!ls", "%time y = 1\n" + body)
    for path in (py, nb):
        sub = extract.load_submission(path)
        assert not sub.broken, sub.broken
        ns = {}
        exec(compile(sub.module_source("f"), "<t>", "exec"), ns)
        assert ns["f"](3) == (True, "3", 4)
    # a bracket inside a multi-line string, then a real magic: still the function
    sub = extract.load_submission(_nb(tmp_path, 'def g(x):\n    t = """a (\nb\n"""\n    return t\n!echo hi'))
    assert not sub.broken and "def g" in sub.module_source("g")


def test_an_untouched_stub_never_hides_an_attempt(tmp_path):
    """The last definition is graded, as a notebook runs top to bottom, except a stub: answers in a
    .py file beside the problem notebook (whose stubs sort after it: `make check` once graded the
    stubs) or written in a cell above the stub's are found; a broken attempt is reported as one."""
    from autograder import registry
    from autograder.engine import grade

    stub = 'def f(x):\n    """Return x + 1."""\n    raise NotImplementedError\n'
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "unit1.py").write_text("def f(x):\n    return x + 1\n")
    _nb(tmp_path, stub).rename(folder / "unit1_parameter_accounting.ipynb")
    sub = extract.load_submissions([folder])
    assert "x + 1" in sub.module_source("f") and not extract.is_stub(sub.function("f").node)
    above = extract.load_submission(_nb(tmp_path, "def f(x):\n    return x + 2", stub))
    assert "x + 2" in above.module_source("f")
    assert "x + 3" in extract.load_submission(_nb(tmp_path, "def f(x):\n    return x + 2", "def f(x):\n    return x + 3")).module_source("f")
    only_stubs = extract.load_submission(_nb(tmp_path, stub, stub))
    assert extract.is_stub(only_stubs.function("f").node)
    # A helper the graded function calls, answered in the .py file and stubbed in the notebook
    # after it (the reference Unit 4 beside the problem notebook: 4.4's read_shard called the
    # notebook's parse_safetensors_header stub, and was reported as not attempted).
    helper = tmp_path / "helper"
    helper.mkdir()
    (helper / "unit1.py").write_text("def g(x):\n    return 2 * x\n\ndef f(x):\n    return g(x) + 1\n")
    _nb(tmp_path, 'def g(x):\n    """Return 2x."""\n    raise NotImplementedError\n', stub).rename(
        helper / "unit1_parameter_accounting.ipynb")
    source = extract.load_submissions([helper]).module_source("f")
    assert "2 * x" in source and "NotImplementedError" not in source, source

    problem = registry.get("1.3")
    call = problem.call
    stub_of = f"def {call}:\n    raise NotImplementedError\n"
    broken = extract.load_submission(_nb(tmp_path, f"def {call}\n    return 1", stub_of))
    assert grade.locate(problem, broken).category == "syntax_error"
    assert grade.locate(problem, extract.load_submission(_nb(tmp_path, stub_of))).status == "not_attempted"


def test_extract_survives_syntax_errors_in_one_block(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("import math\n\ndef good(x):\n    return math.sqrt(x)\n\ndef bad(x)\n    return x\n\n"
                    "@staticmethod\ndef decorated():\n    pass\n")
    sub = extract.load_submission(path)
    assert sub.function("good") is not None and sub.function("decorated") is not None
    assert sub.broken_function("bad").error.startswith("SyntaxError")


def test_stub_detection():
    import ast

    def node(src):
        return ast.parse(src).body[0]

    assert extract.is_stub(node('def f(x):\n    """doc"""\n    # YOUR CODE HERE\n    raise NotImplementedError'))
    assert extract.is_stub(node("def f(x):\n    ..."))
    assert not extract.is_stub(node("def f(x):\n    return x"))


def test_unreadable_notebook_is_reported_not_raised(tmp_path):
    bad = tmp_path / "broken.ipynb"
    bad.write_text("{ not json")
    assert "not a valid notebook" in extract.load_submission(bad).unreadable


def test_future_imports_from_several_cells_are_hoisted(tmp_path):
    path = _nb(tmp_path, "from __future__ import annotations\nimport math", "from __future__ import annotations\n"
               "def f(x: int) -> float:\n    return math.sqrt(x)")
    src = extract.load_submission(path).module_source("f")
    ns = {}
    exec(compile(src, "<t>", "exec"), ns)
    assert ns["f"](4) == 2.0


def test_read_counter_counts_exactly_what_unbuffered_reads_fetch(tmp_path):
    from ckptlab.readcount import count_reads

    path = tmp_path / "blob"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    with count_reads() as reads:
        with open(path, "rb", buffering=0) as f:
            for offset in range(0, 2**20, 2**16):
                f.seek(offset)
                f.read(100)
    assert reads.bytes == 16 * 100
    with count_reads() as reads:
        path.read_bytes()
    assert reads.bytes >= 2**20


def test_notebook_check_counts_reads_and_switches_memory_maps_off():
    import mmap

    import numpy as np

    from autograder.notebook import problem
    from solutions.unit4 import read_shard

    def whole_tensor(path, name, bounds):
        from safetensors.numpy import load

        with open(path, "rb") as f:
            full = load(f.read())[name]
        return np.array(full[tuple(slice(a, b) for a, b in bounds)])

    def memory_mapped(path, name, bounds):
        np.memmap(path, dtype=np.uint8, mode="r")

    q = problem("4.4")
    assert q.check(read_shard).passed
    result = q.check(whole_tensor)
    assert result.status == "incorrect" and "it read" in result.message and "buffering=0" in result.message
    result = q.check(memory_mapped)
    assert result.status == "error" and "memory maps are switched off" in result.message
    assert mmap.mmap.__name__ == "mmap"  # switched back on after the check


def test_hints_come_one_step_at_a_time_and_say_when_there_are_no_more(capsys):
    from autograder.notebook import problem

    q = problem("1.1")
    total = len(q.problem.hints)
    shown = []
    for _ in range(total + 1):
        q.hint()
        shown.append(capsys.readouterr().out)
    assert [s.startswith(f"Hint {i}/{total}:") for i, s in enumerate(shown[:total], 1)] == [True] * total
    assert "No more hints" not in "".join(shown[:total])
    assert shown[total].startswith(f"No more hints: you have seen all {total}.")
    assert f"Hint {total}/{total}:" in shown[total]  # the last one again, said as such


def test_progress_chart_legend_matches_its_bars_and_an_empty_chart_says_why():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from ckptlab.plotting import plot_progress

    rows = [("1.1", 1, 10, 10, "mastered"), ("1.2", 1, 5, 10, "attempted"), ("2.1", 2, 0, 10, "not started")]
    ax = plot_progress(rows)
    legend = {t.get_text(): to_hex(h.get_facecolor()) for t, h in zip(ax.get_legend().texts, ax.get_legend().legend_handles)}
    bars = {to_hex(p.get_facecolor()) for p in ax.patches}
    assert set(legend) == {"mastered", "attempted", "not started"}
    assert set(legend.values()) <= bars  # each swatch is a colour the bars really have
    assert len(set(legend.values())) == 3 and "#1f77b4" not in legend.values()  # not the colour cycle's blue
    assert not [t for t in ax.texts if "Nothing graded yet" in t.get_text()]
    # a problem not started is an empty outline, not a full bar: nothing of it is coloured
    not_started = [p for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - 2.8) < 0.01]  # 2.1, after a gap
    assert not_started and all(to_hex(p.get_facecolor()) == "#ffffff" for p in not_started)
    fresh = plot_progress([(pid, unit, 0, 10, "not started") for pid, unit, *_ in rows])
    (empty,) = [t for t in fresh.texts if "Nothing graded yet" in t.get_text()]
    assert "`" not in empty.get_text()  # matplotlib shows backticks as they are


def test_grading_shortens_the_gil_slices_while_it_runs_and_restores_them_after():
    """The grader's threads that wait on workers get the GIL sooner while grading; the process's
    own setting comes back when the last grading in it ends, nested or concurrent."""
    from autograder.engine.gil import SHORT_GIL_SLICES as _SHORT_GIL_SLICES

    before = sys.getswitchinterval()
    _SHORT_GIL_SLICES.hold()
    _SHORT_GIL_SLICES.hold()
    assert sys.getswitchinterval() == min(before, 0.0005)
    _SHORT_GIL_SLICES.release()
    assert sys.getswitchinterval() == min(before, 0.0005)
    _SHORT_GIL_SLICES.release()
    assert sys.getswitchinterval() == before


def test_submissions_are_parsed_safely_from_several_threads_at_once(root):
    """grade-batch grades learners in threads. In CPython 3.11, two threads building syntax trees
    at once fail with "AST constructor recursion depth mismatch" when a collection runs a finaliser
    mid-parse (it cost a learner their whole grade in a test run): autograder.source.parse takes turns
    (checked: with ast.parse here instead, dozens of the 800 parses fail)."""
    import gc
    import threading

    from autograder import source as source_module

    source = (root / "solutions" / "unit3.py").read_text()
    errors: list[BaseException] = []

    class Finaliser:
        def __del__(self):
            sum(range(50))  # Python code run by the collector, mid-parse

    def work():
        for _ in range(200):
            a, b = Finaliser(), Finaliser()
            a.other, b.other = b, a  # a cycle: freed by a collection
            try:
                source_module.parse(source)
            except SystemError as exc:
                errors.append(exc)

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 1, 1)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert not errors, errors[:3]


def test_a_learner_kernel_loads_no_sandbox_code():
    """The notebook-side modules (checks, hints, drills, progress) import the registry; none of
    them loads the jail, the zygote or the worker (0.3 s of a kernel's start, for one constant)."""
    import subprocess
    import sys

    code = ("import sys; import autograder.registry, autograder.learner.notebook, autograder.learner.drills, autograder.learner.progress; "
            "print(sorted(m for m in sys.modules if m.startswith('autograder.sandbox')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # ...which the check would see: the grader does load it (the sandbox's names load their modules on first use).
    code = code.replace("autograder.learner.progress;", "autograder.learner.progress, autograder.engine.grade; "
                        "autograder.engine.grade.sandbox.Worker;")
    assert "autograder.sandbox.jail" in subprocess.run([sys.executable, "-c", code], capture_output=True,
                                                       text=True, timeout=120).stdout


def test_an_atomic_write_leaves_the_old_file_when_it_fails(tmp_path):
    from autograder.outputs import atomic_write, replacing

    path = tmp_path / "out" / "results.json"
    atomic_write(path, "old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_text("half of the new")
        raise RuntimeError("the writer died")
    assert path.read_text() == "old" and [p.name for p in path.parent.iterdir()] == ["results.json"]
    atomic_write(path, b"new")
    assert path.read_text() == "new"


def test_argument_tree_walkers():
    from autograder.wall.codec import leaves, map_leaves, materialize, needs_jax
    from autograder.wall.files import has_files
    from autograder.wall.kinds import MeshArg, SpecArg

    tree = {"a": [1, (2, MeshArg((("x", 2),)))], "b": SpecArg(("x",))}
    assert list(leaves(tree)) == [1, 2, MeshArg((("x", 2),)), SpecArg(("x",))]
    assert map_leaves(tree, lambda v: v * 10 if isinstance(v, int) else v)["a"] == [10, (20, MeshArg((("x", 2),)))]
    assert needs_jax(tree) and not needs_jax({"a": [1, (2,)]}) and not has_files(tree)
    assert materialize(tree)["b"] == __import__("jax").sharding.PartitionSpec("x")


def test_the_paths_learners_and_existing_course_configs_import_still_exist():
    """Learner notebooks and instructors' nbgrader_config.py files import these by name."""
    from autograder.exports.nbgrader_course import (
        AUTOGRADE_PREPROCESSORS,
        SANITIZE_PREPROCESSORS,
        GradeInSandbox,
        grade_cell,
        quiet_known_warnings,
    )
    from autograder.learner.drills import drill
    from autograder.learner.progress import show_progress
    from autograder.notebook import problem

    assert callable(problem) and callable(drill) and callable(show_progress) and callable(grade_cell)
    assert AUTOGRADE_PREPROCESSORS and SANITIZE_PREPROCESSORS and callable(quiet_known_warnings)
    assert GradeInSandbox in AUTOGRADE_PREPROCESSORS


def test_a_worker_takes_jax_only_for_code_that_imports_it():
    """A worker whose code imports JAX, or a library that imports it, takes JAX's types before that
    code loads (it may return JAX arrays); one whose code imports only the standard library, NumPy or
    safetensors does not load JAX for it (the read-counted workers' own imports, json, struct and the
    like, were once taken for JAX's)."""
    from autograder.sandbox.zygote import imports_jax

    for source in ("import jax", "import orbax.checkpoint as ocp", "from flax import nnx", "from ckptlab import training"):
        assert imports_jax(source), source
    for source in ("import math", "import json, struct, io", "import numpy as np", "from safetensors import safe_open"):
        assert not imports_jax(source), source


def test_a_worker_cannot_send_back_what_only_arguments_are():
    """Meshes, specs and abstract arrays cross to a worker as arguments; from a worker, checked, they
    are refused (a result is built from built-in types and NumPy arrays only)."""
    from autograder.wall import codec, kinds

    for tagged in ({"$mesh": [["x", 16]]}, {"$pspec": {"$tuple": ["x"]}}, {"$abstract": [2], "dtype": "float32"}):
        assert codec.decode(tagged) is not None  # (the grader's own arguments)
        with pytest.raises(ValueError, match="argument"):
            codec.decode({"$dict": {"a": tagged}}, checked=True)
    assert codec.decode(codec.encode(kinds.AbstractArg((3, 4), "bfloat16"))) == kinds.AbstractArg((3, 4), "bfloat16")
