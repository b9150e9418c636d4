"""Every notebook runs top to bottom in a real Jupyter kernel, and is committed clean.

The notebooks run two at a time, each in a kernel of its own (so each runs beside another, on a
loaded machine, as a learner's may): all of those this session selected start when the first test
asks for its result, the longest first, and each test checks its own notebook as it comes. The
suite runs this module after the sandbox's tests (tests/conftest.py), when its background gradings
have ended and the two cores are the notebooks'.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import registry
from autograder.exports.problem_notebooks import notebook_path, problem_notebook, tagged, write_problem_notebooks
from autograder.wall.memory import conversion_budget

pytestmark = pytest.mark.slow


def _notebooks(root):
    return sorted((root / "course").glob("*.ipynb")) + sorted((root / "problems").glob("*.ipynb"))


def _execute(nb, cwd, env=None):
    # One print is several writes, and the kernel flushes them from a thread of its own: on a loaded
    # machine a line came as two outputs ("restored onto 4 devices:" and the rest), and a text
    # joined output by output had a line break inside it. A cell's stream is one output here.
    client = NotebookClient(nb, timeout=600, kernel_name="python3", coalesce_streams=True,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(**({"env": env} if env is not None else {}))
    return nb


# The slowest first (seconds alone, measured): the two kernels end together.
_LONGEST = ("08_preemption.ipynb", "05_training_checkpoints.ipynb", "06_restore_for_serving.ipynb",
            "07_changed_machine_or_code.ipynb", "04_shard_reads_and_presharding.ipynb", "09_hugging_face.ipynb")


class _Runs:
    """The selected notebooks' runs, two at a time, keyed by their tests' ids."""

    def __init__(self, session, root: Path, tmp_factory):
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="notebook")
        self.futures: dict[str, Future] = {}
        self.root, self.tmp = root, tmp_factory
        ours = [item for item in session.items if item.nodeid.startswith(__name__.replace(".", "/") + ".py::")]
        jobs = {}
        for item in ours:
            spec = getattr(item, "callspec", None)
            if item.originalname == "test_lessons_execute":
                jobs[item.nodeid] = (spec.params["name"], self._lesson, spec.params["name"])
            elif item.originalname == "test_untouched_problem_notebook_runs_and_says_not_attempted":
                jobs[item.nodeid] = (f"untouched {spec.params['unit']}", self._untouched, spec.params["unit"])
            elif item.originalname == "test_solved_problem_notebook_passes_its_checks":
                jobs[item.nodeid] = (f"solved {spec.params['unit']}", self._solved, spec.params["unit"])
        rank = {name: i for i, name in enumerate(_LONGEST)}
        from autograder.learner import progress

        self.drills = len([r for r in progress.load() if r.get("kind") == "drill"])
        self.course_before = _left_in(root / "course")
        for nodeid, (_name, run, arg) in sorted(jobs.items(), key=lambda kv: rank.get(kv[1][0], len(rank))):
            self.futures[nodeid] = self.pool.submit(run, arg)

    def _lesson(self, name):
        # The kernel, and every process a lesson starts, writes its scratch under a temp folder of
        # its own: a lesson removes what it writes (checkpoints, safetensors files, kept scratch), so
        # it must leave that folder as it found it.
        temp = self.tmp.mktemp(name.split("_")[0])
        nb = _execute(nbformat.read(self.root / "course" / name, as_version=4), self.root / "course",
                      env={**os.environ, "TMPDIR": str(temp)})
        return nb, _left_in(temp)

    def _untouched(self, unit):
        path = notebook_path(unit, self.root)
        return _execute(nbformat.read(path, as_version=4), path.parent)

    def _solved(self, unit):
        nb = problem_notebook(unit, with_solutions=True)
        for p in registry.PROBLEMS:
            if p.unit == unit:
                cell = tagged(nb, "hint", p)
                cell.source = cell.source.removeprefix("# ")  # also run the hint cells
        return _execute(nb, self.tmp.mktemp(f"solved{unit}"))

    def result(self, nodeid: str):
        return self.futures[nodeid].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def runs(request, root, tmp_path_factory):
    started = _Runs(request.session, root, tmp_path_factory)
    yield started
    started.close()


def _text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", ""))
            data = o.get("data", {})
            out.append(data.get("text/markdown") or data.get("text/plain", ""))
    return "\n".join(out)


def test_notebooks_are_committed_without_outputs(root):
    for path in _notebooks(root):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell["outputs"] and cell["execution_count"] is None, f"{path.name} has outputs"
        assert "pip install" not in path.read_text() and "wget" not in path.read_text()


def test_first_code_cell_sets_up_devices(root):
    for path in _notebooks(root):
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert "setup_devices()" in first.source, path.name


def test_problem_notebooks_match_the_registry(root, tmp_path):
    write_problem_notebooks(tmp_path)
    for built in (tmp_path / "problems").glob("*.ipynb"):
        committed = root / "problems" / built.name
        assert committed.exists(), f"run `python -m autograder notebooks` to create {built.name}"
        assert nbformat.read(committed, as_version=4) == nbformat.read(built, as_version=4), (
            f"{built.name} is out of date with the registry: run `python -m autograder notebooks`")


LESSONS = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "course").glob("*.ipynb"))


# What a lesson must show when run: its real results, not just that it ran.
SHOWS = {
    "00_start_here.ipynb": ("Replace ... with your answer",),
    # JAX's uneven-sharding error printed whole (it was cut off mid-word), wrapped to fit: its stable start
    # (JAX 0.12 writes the tiling factors as (4, 1) where 0.10 wrote [4, 1]; the cell asserts the rest)
    "01_parameter_accounting.ipynb": ("IndivisibleError:\nOne of device_put args was given the sharding NamedSharding(",
                                      "parameters on disk: 131328  counted: 131328", "removed: True"),
    "02_sharded_save_layouts.ipynb": (
        "the top-level node is a byte-for-byte copy of process 0's newest root: True",
        "of values outside it, all in ocdbt.process_0/d/: True", "bytes of data + 20 bytes of index",
        # replica 0 by the mesh's order: the writers of a mesh listed in reverse id order
        "mesh order: [7, 6, 5, 4, 3, 2, 1, 0]", "writers (Orbax): [1, 3, 5, 7]",
        "replica 0 of each shard (JAX): [1, 3, 5, 7]",
        # the O(P / N_shards) save-time claim, timed: one host's bytes set the time
        "16 shards not even 4x faster than 1: True",
        # Orbax v1 beside v0: the files each writes, the metadata read both ways; the lesson removes its files
        "v1 = v0's files, the tree's under state/, plus an empty orbax.checkpoint: True",
        "v1's metadata of the v0 checkpoint, the same shapes: True", "removed: True"),
    "03_restore_resharding.ipynb": (
        # the amplifications section 2's text states, as TensorStore measured them read alone (the
        # bound with no sharing), and as real Orbax restores read them in one and two processes
        "{'same axis': 2.0, 'another axis': 16.0, '2-D mesh': 4.0, 'replicated': 1.0}",
        "every process read between its two bounds: True",
        "replicated: each process read the array once: True",
        "another axis, well under the bound with no sharing (below 3/4 of it): True",
        "no target                 w on 8 devices, spec P('x',)",
        "target without shardings  w on 8 devices, spec P('x',)",
        "partial restore: {'w': ((64, 32), P(None, 'x'))}",
        "lost chunk: Exception - Encountered error while reading array index",
        "OCDBT, 8 KiB w without process 0's data files: restored, same values: True",
        "OCDBT, 4 MiB array without process 0's data files: Exception",
        "explorer: 4x with one read per chunk per host of 4 devices, 16x with no sharing; TensorStore read alone 16x",
        # Orbax v1's load beside v0's restore; the lesson removes its files
        "v1 load: P('x',) on 16 devices, same values: True", "removed: True"),
    "05_training_checkpoints.ipynb": (
        # a donation is shown by its effects: deleted and its buffers reused (on CPU, not right after save())
        "no save                      the donated array deleted: True   buffers reused: 16 of 16",
        "right after save()           the donated array deleted: False  buffers reused:  0 of 16",
        "after wait_until_finished()  the donated array deleted: True   buffers reused: 16 of 16",
        "the checkpoint holds the values as they were at save(): True", "warnings from JAX about donations: 0",
        "JAX said nothing of the declined donation, and the same listener hears its donation warning (the control): True",
        # InitialSavePolicy beside the interval
        "save_interval_steps=2; save() saved at steps [1, 2, 4, 6, 8, 10]",
        # the bound from a plain synced write, the bytes counted by the kernel; the rest is the save's own work
        "every save at or above the one-host bound: True", "closer to its bound than the default save on 16 shards: True",
        "the resumed run's parameters equal the uninterrupted run's, bit for bit, and training.uninterrupted_params(12, 0)'s: True",
        # Orbax v1's training Checkpointer beside the manager: its policies, its blocking save, no restore
        "v1, every 2 or the first, latest 3  steps 1 to 10 offered: saved [1, 2, 4, 6, 8, 10], kept [6, 8, 10]",
        "ckptr.restore(latest): AttributeError: 'Checkpointer' object has no attribute 'restore'",
        "v1's save() waits for the commit, save_async() does not: True", "the lesson's folder removed: True"),
    "06_restore_for_serving.ipynb": (
        # a restore without shardings, by API (Lesson 3 says the same)
        "StandardCheckpointer, no target:           ArrayImpl float32 on 8 devices, spec P('x',)",
        "PyTreeRestore, leaves without a sharding:   numpy.ndarray bfloat16",
        # what the devices hold counts the data axis's replicas, and bounds the peak from below
        "kept: 32 MiB of bfloat16 parameters; the devices hold 64 MiB", "every restore between its bounds: True",
        # the limiter reserves the chunk-aligned box around a target shard: for embed, the whole array
        "a shard's box: 16.00 MiB of bfloat16 (the whole array: True)",
        "ValueError: Requested more bytes than we reserved space for: 16777216 >",
        "equal to the hub's tensor: True", "every peak above what its devices hold: True",
        # a load with no target: Orbax's own warning, recorded and shown
        "this option is unsafe when restoring on a different topology", "the lesson's folder removed: True"),
    "07_changed_machine_or_code.ipynb": (
        # another device count: Orbax's own refusal without a target (and the control: the count it was
        # saved with restores); the fixes restore the saved values
        "4 device(s)  no_target      ValueError: Topology mismatch detected",
        "16 devices  no_target      restored: True, on 16 devices, values equal: True",
        "1 device(s)  from_metadata  restored: ArrayImpl on 1 device(s), values equal: True",
        "2 device(s)  numpy          restored: ndarray on 0 device(s), values equal: True",
        "restored onto 4 devices: {'b': (4, True), 'w': (4, True)}",
        # a checkpoint two processes wrote: their folders, the devices by id, refused on as many devices
        "its folders: ['array_metadatas', 'd', 'ocdbt.process_0', 'ocdbt.process_1']",
        "the devices its metadata names: [0, 1, 2, 3, 2048, 2049, 2050, 2051]",
        "8 device(s)  no_target      ValueError: Topology mismatch detected",
        # the topology check is a lookup of device ids: saved ids found restore silently, a missing one refuses
        "a process of 8 devices restores it, silently, onto ids 0 to 3 of its 8: True",
        "a process of 2 devices refuses it (ids 2 and 3 missing): True",
        "every peak at or above what the devices hold: True",
        "v1, ocp_v1.load onto 4 devices: {'b': (4, True), 'w': (4, True)}",
        # when restore() returns is measured, not assumed (JAX 0.12: all 16 copies in place; 0.10.2: a few)
        "after block_until_ready the devices hold 16; all 16 in place at the return: ",
        "replicated: 1 device(s) 1 copies, 4 device(s) 4 copies, 16 device(s) 16 copies",
        # loud and silent changes as Orbax does them (warnings and log lines counted), then each silent
        # one found from the metadata
        "two layers             raised ValueError: User-provided restore item and on-disk value metadata tree",
        "six layers, partial    no error, 0 warnings, 0 log lines", "'layer4': 'ShapeDtypeStruct'",
        # the listeners' control; Orbax's strict skip; strict=False's zero rows; check_target counts replicas
        "the listeners hear a warning and a log line when there is one (the control): True  (heard: (1, 1))",
        "a misspelt or omitted leaf beside placeholders is refused too: True",
        "strict=False fills the grown rows with zeros, the saved rows as saved: True",
        "section 1's w replicated on 16: ['16 copies on 16 devices, 512 MiB held for 32 MiB: w']",
        "step 16777216.0 (float32), epoch 16777215.0",
        "the model as saved: nothing to report", "cast int32 -> float32 can lose values: step",
        "bfloat16 for serving, cast not allowed: 4 problems; allowed: nothing to report",
        # a target without shardings lands on the saved layout, silently; its control on the new mesh
        "shapes and dtypes only             kernel on  4 devices, up to 256 KiB on one, 0 warnings; "
        "check_target: ['no sharding, so the saved layout: dense/bias/value'",
        "the model's shardings on the mesh  kernel on 16 devices, up to 64 KiB on one, 0 warnings; "
        "check_target: nothing to report",
        # an optimizer wrapped in a chain: refused; migrated, the moments kept (a fresh state's are not)
        "restored into the clipped optimizer's state: User-provided restore item",
        "the migrated state has the clipped optimizer's tree: True",
        "Adam's state moved       first moments as trained: True, step count 1",
        "a fresh state (control)  first moments as trained: False, step count 0",
        # the course's tool on the lesson's checkpoint: inspected from its records, then compared
        "params/layer0  (256, 64)  float32  x 16      P('x')  1         (16, 64)  16",
        "step           ()         int32    x 16      P()     16        ()        1",
        "a copy: the same model", "one layer scaled by 1.001: {'values': ['params/layer2']}",
        "values differ: params/layer2 (16,384 element(s)",
        "one layer scaled by 1.001, rtol 1e-4: {'values': ['params/layer2']}",
        # a comparison that knows the dtype: a tolerance misses what is below it; cast then exact; bfloat16's rounding
        "a tolerance above the change does not find it: 'the same model' at rtol 1e-2 and 2^-8: True",
        "cast then exact: the conversion equals the hand cast bit for bit, the changed one is found: True",
        "rtol 2^-8 (bfloat16's rounding): the cast is only a dtype difference, the 0.1% change is found: True",
        "the bfloat16 model's outputs stay within 1/20 of the control's difference: True",
        # a scanned Linen model into per-layer NNX: refused straight; migrated, the same function (its
        # control, two layers swapped, matches the tree and not the outputs: checked below)
        "restored straight into the NNX model: Structure mismatch",
        "each layer to its own              every shape and dtype as the model's: True; largest output difference: 0\n",
        "layers 1 and 2 swapped (control)   every shape and dtype as the model's: True"),
    "04_shard_reads_and_presharding.ipynb": (
        "same as safetensors: True", "every device's shard equals the bytes of its runs",
        "unbuffered               right values: True; read 512 bytes for 512 needed",
        "(kernel count):  8,192 bytes = 1x the tensor", "process 1 of 2",
        "replicating final_norm.scale instead of sharding it cost Orbax 0 more bytes", "ocdbt.process_0/", "ocdbt.process_1/", "P('x',) same values: True",
        # what the devices hold after a re-shard, beside a replicated control; a real re-shard's host RAM
        "the re-sharded tree, the checkpoint's arrays once; the replicated control, 16 times: True",
        "more than one copy: True",
        # pre-sharding's saving, measured per host on two real hosts
        "expert-parallel: each host read the whole tensor: True", "pre-sharded: each host read only its half: True",
        # in object storage: each host's range GETs, counted by the server, inside the plan's bracket
        "s3_ep16: each host's bytes, counted by the server, between the plan's floor and its ceiling (plus metadata): True",
        "s3_fsdp16: each host's bytes, counted by the server", "expert-parallel: each host paid about its ceiling (95% of it or more): True",
        "more than 6x fewer bytes from the store, and more than 4x fewer GETs: True",
        "removed: True"),
    "08_preemption.ipynb": (
        # real SIGTERMs to a job of two real hosts; each outcome read from outside
        "with no handler, the SIGTERM ends the process at once (exit -15), well inside the grace window: True",
        # the PID 1 trap: the same program with no handler, an ordinary process (the pid 1 runs: below)
        "an ordinary process with no handler ends on the SIGTERM at once (status -15): True",
        "both hosts saved the same step for the preemption, though only host 0 was signalled: True",
        "the hosts disagree: host 0 stopped to save, host 1 trained on: True",
        "the save never committed (its temporary folder is left) and both were SIGKILLed at the window's end: True",
        "grace 0.5 s, under the budget: SIGKILLed mid-evaluation, nothing saved for the preemption, steps lost: True",
        "grace 5 s, over the budget: the step saved and committed, nothing lost, each host ended within the budget: True",
        "then both hosts saved one later step, the same, inside the window: True",
        # the budget's terms measured on their own: the notifier's poll, the exit (os._exit beside sys.exit)
        "the hosts agreed within 1.5 s of the SIGTERM (the notifier's poll, at most a second, then a step and the agreement), on its step or a later one: True",
        "os._exit after the commit: each host ended within 0.2 s of its last log line: True",
        "sys.exit, the control: each host's teardown took 4 times as long or more: True",
        # the loop copied into one process (problem 8.3's): InitialSavePolicy, and no sync point
        "every step offered: saved [1, 2, 4]; force=True at the multiples of 2 only: saved [2, 4]",
        "and the SIGKILL ended it with nothing saved (two hosts joined by jax.distributed, above: True): True",
        # the data pipeline's position: Grain's handler, forgotten, fewer hosts, recomputed from the step
        "restored with Grain's handler on 2 hosts: every one of the 48 examples read exactly once: True",
        "is the next 8 of the shuffled order, row by row: True",
        "read strided, the 2 hosts' global batch holds the 1 host's examples in another row order, at every step: True",
        "restored into 2 workers (the control): the very batches the saved iterator read next: True",
        "restored into 1 worker: refused, IndexError: True",
        "the pipeline restarted: the first 24 examples read twice, the last 24 never: True",
        "Grain's handler refuses the restore when the process count changed: True",
        "the position recomputed from the global step: on 1 host, every example read exactly once: True",
        # checkpoints in tiers: Orbax's emergency manager on real processes, restored after each harm
        "replica slice 0 wrote only the persistent tier: steps 5 and 10: True",
        "without Orbax's device-id map the local tier's save raises, naming the call: True",
        "process 2's local tier lost: Orbax still restores step 12, read by slice 1: True",
        "the persistent tier's step 10 is newer than slice 1's only copy (8): read by the primary slice: True",
        "the every-host rule (the control) finds no local step even with nothing lost: it would resume from 10: True",
        "holes in both local slices: step 12, read by slice 2, the one that holds it complete: True",
        "process 3 lacks step 12: slice 1 is incomplete there, so step 10, read locally (a tie with the persistent tier): True",
        "a step whose data is gone is still chosen (latest step 12), and its restore raises: True",
        "removed: True"),
    "10_frontier_run.ipynb": (
        # the simulation against the closed form it is taught beside, and the control that tells them apart
        "every simulated mean within its 95% Monte Carlo interval of the exact closed form: True",
        "the control: the first-order form lies outside the interval at 10x the optimum",
        # Llama 3's published run reproduced, beside the control that misses it
        "the published 466 lies inside the central 95% of simulated runs: True",
        "the control: without the planned interruptions, 466 lies outside it: True",
        "a local tier beats persistent only, and a second copy beats one, each beyond the paired spread: True",
        "removed: True",
    ),
    "09_hugging_face.ipynb": (
        # the three trees one model is saved as, each read
        "nnx.state saved as it is: every leaf's path ends in 'value': True",
        "saved_paths finds every leaf of the model in each of the three: True",
        # a tree that matches proves nothing: the mistakes against right float32 and bfloat16 conversions
        "every tree matches, mistakes included: True",
        "bfloat16 rounding: a few parts in a thousand, above float32's tolerance, 10 times under bfloat16's: True",
        "every mistake: over 0.1 (tens of percent), at least twice bfloat16's tolerance: True",
        # sharded safetensors with their index, both ways, proven by the logits
        "its logits, read from the files alone: within float32's tolerance: True",
        # the reference's precision (JAX's default rounds matmul inputs on GPUs and TPUs), Meta's rotary order
        "so against either, the right float32 conversion fails float32's tolerance; against highest it passes: True",
        "the permutation forgotten: every name and shape right, the logits off by over 0.1: True",
        "the view comes back as the kernel reshaped, not transposed: True",
        "the column slice comes back as the bytes after its first element (rows of qkv), not k's columns: True",
        # one layer of a stacked leaf: from chunks of every layer it reads the whole leaf
        "chunks of every layer: layer 3 alone read 95% of the whole leaf's bytes or more, and held over 1.5 times the layer: True",
        "every leaf but the norm scales comes back bit for bit: True",
        # memory measured from outside, beside the whole model at once
        "leaf by leaf, both ways: under the grader's budget: True", "the whole model at once, both ways: over it: True",
        "both refused, each saying what is wrong: True", "removed: True"),
}


# Figures each lesson draws (an inline image each), so one that fails to draw is noticed: the start
# notebook's, and each unit's from its record.
FIGURES = {"00_start_here.ipynb": 2, "07_changed_machine_or_code.ipynb": 1} | {u.lesson: u.lesson_figures
                                                                            for u in registry.UNITS.values()}


def _left_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", LESSONS)
def test_lessons_execute(root, name, runs, request):
    from autograder.learner import progress

    nb, left = runs.result(request.node.nodeid)
    assert not left, f"{name} left {len(left)} files and folders in the temp folder: {left[:10]}"
    assert _left_in(root / "course") == runs.course_before, "a lesson left files in course/"
    # Running a lesson top to bottom records nothing: a drill counts once the learner answers it.
    assert len([r for r in progress.load() if r.get("kind") == "drill"]) == runs.drills
    text = _text(nb)
    assert "16 CPU devices ready" in text
    for shown in SHOWS.get(name, ()):
        assert shown in text, shown
    assert "values: False" not in text
    if name == "04_shard_reads_and_presharding.ipynb":  # the buffer size the lesson talks of is the one it measures
        stated = re.search(r"open\(\) buffers ([\d,]+) bytes", text)
        fetched = re.search(r"one 8-byte buffered read fetched ([\d,]+) bytes", text)
        assert stated and fetched and stated.group(1) == fetched.group(1), (stated, fetched)
        assert "8 KiB here" not in "".join(c.source for c in nb.cells)
        merged = float(re.search(r"max gap 112 bytes: 16 runs in 1 read\(s\), ([\d.]+)x", text).group(1))
        assert f"fetches about {merged:.1f} bytes for every one" in " ".join(" ".join(c.source.split()) for c in nb.cells)
    if name == "07_changed_machine_or_code.ipynb":  # the control's outputs differ: the check could fail
        swapped = float(re.search(r"layers 1 and 2 swapped \(control\).*largest output difference: ([\d.e+-]+)", text).group(1))
        assert swapped > 0.01, swapped
        two_hosts = text[text.index("the devices its metadata names"):]
        assert "1 device(s)  from_metadata  restored: ArrayImpl on 1 device(s), values equal: True" in two_hosts
    if name == "03_restore_resharding.ipynb":  # plan with the range: a misaligned layout reads above its floor
        low, high = (float(x) for x in re.search(r"another axis, each process read ([\d.]+)x to ([\d.]+)x its floor",
                                                 text).groups())
        assert 0.95 <= low <= high, (low, high)
        assert "model to plan with" not in "".join(c.source for c in nb.cells)
    if name == "05_training_checkpoints.ipynb":
        # the timed state is not compressible to nothing (jnp.ones is: the control), and the bandwidth
        # that bounds the saves is measured on its own, never from the saves it bounds
        ones = float(re.search(r"jnp.ones: +([\d.]+) KiB on disk", text).group(1))
        kept = float(re.search(r"random floats: +[\d.]+ KiB on disk, ([\d.]+)x the arrays", text).group(1))
        assert ones < 64 and kept > 0.85, (ones, kept)
        source = "".join(c.source for c in nb.cells)
        assert "min(measured.values())" not in source and "os.fsync" in source
    if name == "06_restore_for_serving.ipynb":
        # replicas measured in a fresh process; the conversions' own memory against 6.2's budget, the
        # mapped file's pages shown resident (the control) but not counted
        copies = float(re.search(r"the process grew \d+ MiB \(([\d.]+) copies\)", text).group(1))
        assert 15 <= copies <= 17, copies
        own = {how: float(ratio) for how, ratio in re.findall(r"(\w+) +peak resident +\d+ MiB \([\d.]+x the file\); its own "
                                                               r"memory +\d+ MiB \(([\d.]+)x the file", text)}
        budget = conversion_budget(32 * 2**20) / (64 * 2**20)  # 6.2's, for its 64 MiB file whose largest tensor is 32 MiB
        assert own["tensor_by_tensor"] < budget and own["safe_open"] < budget, own
        assert own["load_file"] > budget and own["one_save"] > budget, own
        mapped = float(re.search(r"at least \d+ MiB \(([\d.]+)x the file\) above its own", text).group(1))
        assert mapped > 0.45, mapped  # at least the largest tensor's pages (half the file), mapped
        source = "".join(c.source for c in nb.cells)
        assert "Sixteen copies" not in source and "16 MiB chunks" not in source and "one tensor's worth" not in source
    if name == "07_changed_machine_or_code.ipynb":
        # a replicated restore: one copy per device, counted by the kernel in fresh processes; split: one
        copies = {label: (float(held), float(peak)) for label, held, peak in re.findall(
            r"(replicated, \d+ device\(s\)|split, 16 devices) +predicted +\d+ copies; the devices hold +([\d.]+); "
            r"the process's peak +([\d.]+) copies", text)}
        assert copies["replicated, 16 device(s)"][0] == 16 and 15 <= copies["replicated, 16 device(s)"][1] <= 20, copies
        assert copies["split, 16 devices"][1] < 4, copies
        assert "231 GiB" not in "".join(c.source for c in nb.cells)
    if name == "08_preemption.ipynb" and "refused here" not in text:  # where new pid namespaces are allowed
        for shown in ("as pid 1 of its own pid namespace, the same program ignores the SIGTERM and runs on to the "
                      "SIGKILL: True", "under a minimal init it is pid 2 and ends at once; the init exits 143",
                      "with a SIGTERM handler, pid 1 gets the signal: the handler ends it at once (status 0): True"):
            assert shown in text, shown
    if name == "02_sharded_save_layouts.ipynb":
        # the small layer's OCDBT files count its bytes twice or more; the explorer predicts Orbax's files
        counted = float(re.search(r"dense_ocdbt .*\(([\d.]+)x counted\)", text).group(1))
        assert counted >= 2, counted
        explorer = re.search(r"explorer's chunk files: (.*)", text).group(1)
        assert explorer == re.search(r"Orbax wrote above: +(.*)", text).group(1)
    figures = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    assert figures == FIGURES[name], "a figure the lesson draws is missing"
    if name in ("02_sharded_save_layouts.ipynb", "03_restore_resharding.ipynb"):  # the explorer is shown as a widget
        assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for c in nb.cells
                   for o in c.get("outputs", []))


@pytest.mark.parametrize("unit", registry.units())
def test_untouched_problem_notebook_runs_and_says_not_attempted(unit, runs, request):
    text = _text(runs.result(request.node.nodeid))
    n = sum(p.unit == unit for p in registry.PROBLEMS)
    assert text.count("Not attempted") == n and "Correct" not in text


@pytest.mark.parametrize("unit", registry.units())
def test_solved_problem_notebook_passes_its_checks(unit, runs, request):
    text = _text(runs.result(request.node.nodeid))
    n = sum(p.unit == unit for p in registry.PROBLEMS)
    assert text.count("public examples") == n and "Incorrect" not in text and "Not attempted" not in text
    assert "Hint 1/3" in text
