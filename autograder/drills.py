"""Quick-fire drills: short numeric questions with fresh numbers every time, from the accounting
the course teaches, with immediate feedback and the worked answer.

Terminal: ``python -m autograder drill [--count N] [--kind KIND]``. Notebook::

    from autograder.drills import drill
    q = drill()          # a random kind; drill("reshard_ram") for one kind
    q.answer("28 GB")    # right or not, and the worked answer

Answers may carry units ("1.5 GiB", "12,288", "4x"); byte units are converted.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import numpy as np

DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2, "int8": 1}
_ASK = {"bytes": "in bytes", "GB": "in GB", "params": "a number of parameters", "chunks": "a number of chunks",
        "runs": "a number of runs", "x": "how many times, e.g. 4x", "byte offset": "a byte offset",
        "s": "in seconds", "step": "a step number"}
_BYTE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass
class Question:
    kind: str
    text: str
    solution: float  # the right answer, in `unit`
    unit: str  # "bytes", "GB", "params", "chunks", "runs", "x" (times the bytes needed), "byte offset"
    worked: str
    rel_tol: float = 0.0  # 0: exact (answers are whole numbers); else a relative tolerance
    unit_of_study: int = 0
    facts: dict = field(default_factory=dict)  # the generated numbers, for tests and worked answers
    asked: float = field(default_factory=time.monotonic)

    @property
    def ask(self) -> str:
        return f"answer: {_ASK.get(self.unit, self.unit)}"

    def __repr__(self) -> str:
        return f"{self.text}\n({self.ask})"

    def _repr_markdown_(self) -> str:
        return f"**Drill ({self.kind})**: {self.text}\n\n*{self.ask.capitalize()}: call `.answer(...)` on this question.*"

    def shown(self, value: float) -> str:
        if self.unit == "step":
            return f"step {_fmt(value)}"
        return f"{_fmt(value)}x" if self.unit == "x" else f"{_fmt(value)} {self.unit}"

    def grade(self, reply) -> tuple[bool | None, str]:
        """(right?, feedback with the worked answer); None when the reply is not a number."""
        try:
            value = parse_answer(reply, self.unit)
        except ValueError as e:
            return None, f"{e}. Answer with a number (units like 'GiB' or 'x' are fine)."
        right = math.isclose(value, self.solution, rel_tol=self.rel_tol or 1e-9, abs_tol=1e-9)
        head = "Right." if right else f"Not quite: you said {self.shown(value)}, the answer is {self.shown(self.solution)}."
        return right, f"{head}\nWorked answer: {self.worked}"

    def answer(self, reply, learner: str | None = None) -> bool | None:
        """Check a reply, print the feedback, and record it in your progress. ``...`` (the
        notebook's placeholder) or None is no answer yet: nothing is checked or recorded."""
        if reply is None or reply is Ellipsis:
            print(f"Replace ... with your answer ({self.ask}) and run the cell again: it is checked, the worked "
                  "answer is shown, and it counts in your progress.")
            return None
        right, feedback = self.grade(reply)
        print(feedback)
        if right is not None:
            from autograder import progress
            from autograder.invoke import default_learner

            progress.record_drill(learner or default_learner(), self.kind, right, time.monotonic() - self.asked)
        return right


def _fmt(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.4g}"


def parse_answer(reply, unit: str) -> float:
    """A number from a reply: ``12,288``, ``1_000``, ``1.5e9``, ``3 GiB``, ``4x``."""
    if isinstance(reply, (int, float, np.integer, np.floating)) and not isinstance(reply, bool):
        return float(reply)
    text = str(reply).strip().lower().replace(",", "").replace("_", "")
    m = re.fullmatch(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*([a-z]*)\.?", text)
    if not m:
        raise ValueError(f"{reply!r} is not a number")
    value, suffix = float(m.group(1)), m.group(2)
    if suffix in _BYTE_UNITS and unit in ("bytes", "GB", "byte offset"):
        value *= _BYTE_UNITS[suffix]
        return value / 10**9 if unit == "GB" else value
    if suffix and suffix not in ("x", "times", "params", "parameters", "chunks", "chunk", "runs", "run", "sec", "seconds",
                                  unit.lower()):
        raise ValueError(f"{suffix!r} is not a unit for {unit}")
    return value


# --- the kinds of drill ------------------------------------------------------------------------

def _dtype(rng) -> tuple[str, int]:
    name = str(rng.choice(list(DTYPES)[:3]))
    return name, DTYPES[name]


def shard_bytes(rng) -> Question:
    dtype, size = _dtype(rng)
    data, model = [(2, 2), (2, 4), (2, 8), (4, 2), (4, 4)][int(rng.integers(5))]  # at most the course's 16
    mesh = {"data": data, "model": model}
    spec = [("data", "model"), (None, "model"), ("data", None), ("model", None)][int(rng.integers(4))]
    shape = tuple(int(rng.choice([1024, 2048, 4096, 8192])) for _ in range(2))
    per = [n // (mesh[a] if a else 1) for n, a in zip(shape, spec)]
    spec_s = "P(" + ", ".join(repr(a) if a else "None" for a in spec) + ")"
    return Question(
        "shard_bytes",
        f"A {dtype} parameter of shape {shape} is sharded {spec_s} on a mesh {mesh}. How many bytes of it "
        "does one device hold?",
        per[0] * per[1] * size, "bytes",
        f"each device holds ({per[0]}, {per[1]}): dimension 0 {'/ ' + str(mesh[spec[0]]) if spec[0] else 'whole'}, "
        f"dimension 1 {'/ ' + str(mesh[spec[1]]) if spec[1] else 'whole'}; {per[0]} x {per[1]} x {size} bytes "
        f"= {per[0] * per[1] * size:,} bytes. Axes not named in the spec replicate.", facts=dict(dtype=dtype, shape=shape, mesh=mesh, spec=spec), unit_of_study=2)


def model_bytes(rng) -> Question:
    dtype, size = _dtype(rng)
    layers, width, m = int(rng.integers(2, 9)), int(rng.choice([1024, 2048, 4096])), int(rng.choice([4, 8, 16]))
    kernel, bias = width * width // m, width
    total = layers * (kernel + bias) * size
    return Question(
        "model_bytes",
        f"An MLP of {layers} nn.Dense({width}) layers on inputs of width {width}, in {dtype}. Kernels are "
        f"sharded over their output dimension on {m} devices; biases are replicated. How many parameter bytes "
        "does one device hold?",
        total, "bytes",
        f"per layer a device holds {width} x {width}/{m} = {kernel:,} kernel values and all {bias:,} bias values; "
        f"{layers} layers x {kernel + bias:,} x {size} bytes = {total:,} bytes.", facts=dict(dtype=dtype, layers=layers, width=width, devices=m), unit_of_study=1)


def dense_params(rng) -> Question:
    n, f, shards = int(rng.choice([3, 16, 100, 784, 1000])), int(rng.choice([8, 10, 64, 128, 256])), int(rng.choice([2, 4, 8]))
    total = n * f + f
    return Question(
        "dense_params",
        f"nn.Dense({f}) is initialised on inputs of shape (32, {n}). Its checkpoint is split evenly into "
        f"{shards} shards. How many parameters are in one shard (it may be a fraction)?",
        total / shards, "params",
        f"kernel ({n}, {f}) = {n * f:,} and bias ({f},) = {f}: {total:,} in total, / {shards} = {_fmt(total / shards)}. "
        "The batch size (32) plays no part.", rel_tol=1e-6, facts=dict(n=n, features=f, shards=shards), unit_of_study=1)


def reshard_ram(rng) -> Question:
    billions = int(rng.choice([7, 8, 13, 16, 34, 70, 236, 405, 671]))
    dtype, size = _dtype(rng)
    return Question(
        "reshard_ram",
        f"Re-sharding a checkpoint on CPU (as MaxText's reshard_checkpoint does) holds at least the whole model "
        f"in host RAM. What is that floor for {billions} billion {dtype} parameters, in GB (10^9 bytes)?",
        billions * size, "GB",
        f"{billions} x 10^9 parameters x {size} bytes = {billions * size:,} GB ({size}X GB for X billion "
        f"{dtype} parameters). The peak is higher: Lesson 4 measures a real restore and save well above the "
        "weights (about 2x for its 64 MiB of random bfloat16), and MaxText reported 63 GB for the 32 GB of "
        "DeepSeek-V2-16B.", rel_tol=0.01,
        facts=dict(billions=billions, dtype=dtype), unit_of_study=4)


def ep_chunks(rng) -> Question:
    experts, layers, emb, mlp = int(rng.choice([16, 64, 128])), int(rng.choice([2, 26, 60])), 2048, 1408
    ep = int(rng.choice([e for e in (4, 8, 16) if experts % e == 0]))
    fsdp = int(rng.choice([16, 32, 64]))
    shape = (experts, layers, emb, mlp)
    facts = dict(shape=shape, ep=ep, fsdp=fsdp)
    variant = rng.random()
    if variant < 1 / 3:
        return Question(
            "ep_chunks",
            f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices (each chunk holds "
            f"{experts // ep} experts, all of the other dimensions). A job shards dimension 2 over {fsdp} devices "
            "(FSDP). How many saved chunks does one of its devices' slices overlap?",
            ep, "chunks",
            f"a device needs rows {emb // fsdp} of dimension 2 for every expert, and every chunk holds some experts "
            f"with all of dimension 2: it overlaps all {ep} chunks.", facts=facts, unit_of_study=4)
    if variant < 2 / 3:
        return Question(
            "ep_chunks",
            f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices. A job shards dimension 2 "
            f"over {fsdp} devices (FSDP). One of its devices, reading alone (no sharing with other devices of its "
            "host), reads how many times the bytes it needs? (the ceiling: no read shared)",
            fsdp, "x",
            f"it reads every chunk, so the whole tensor, and needs 1/{fsdp} of it: {fsdp}x. Pre-sharded with chunks "
            f"split over dimension 2 it would read only the chunk it needs.", facts=facts, unit_of_study=4)
    per_host = int(rng.choice([d for d in (2, 4, 8) if d < fsdp]))
    return Question(
        "ep_chunks",
        f"An MoE weight of shape {shape} was saved expert-parallel over {ep} devices. A job shards dimension 2 "
        f"over {fsdp} devices (FSDP), {per_host} devices per host. If each host read every chunk it needs once "
        "(the floor: one read per chunk per host), how many times the bytes the host needs would it read?",
        fsdp // per_host, "x",
        f"the host's {per_host} devices together need {per_host}/{fsdp} of dimension 2, and each of their slices "
        f"overlaps all {ep} chunks: read once, that is the whole tensor, {fsdp}/{per_host} = {fsdp // per_host}x "
        f"what they need (the floor; each device alone would read {fsdp}x: a real restore lands between, Lesson 3).",
        facts={**facts, "per_host": per_host}, unit_of_study=4)


def row_restore(rng) -> Question:
    rows, cols = int(rng.choice([1024, 4096])), int(rng.choice([512, 1024]))
    saved, restored = int(rng.choice([4, 8])), int(rng.choice([2, 4, 8, 16]))
    facts = dict(shape=(rows, cols), saved=saved, restored=restored)
    if rng.random() < 0.5:
        amp = max(restored // saved, 1)
        how = (f"each of the {restored} devices needs {rows // restored} rows, inside one chunk of {rows // saved} "
               f"rows that it reads whole: {rows // saved}/{rows // restored} = {amp}x." if restored > saved else
               f"each device needs {rows // restored} rows: {saved // restored} whole chunk(s) of {rows // saved} rows, "
               "exactly what it needs: 1x.")
        return Question(
            "row_restore",
            f"A ({rows}, {cols}) array was saved row-sharded over {saved} devices (one chunk per shard). It is "
            f"restored row-sharded over {restored} devices. One device, reading alone (no sharing with other "
            "devices of its host), reads how many times the bytes it needs? (the ceiling: no read shared)",
            amp, "x", how, facts=facts, unit_of_study=3)
    per_host = int(rng.choice([d for d in (2, 4, 8) if d <= restored]))
    host_rows, chunk_rows = rows // restored * per_host, rows // saved
    amp = max(chunk_rows // host_rows, 1)
    how = (f"the host's {per_host} devices need {host_rows} consecutive rows, inside one chunk of {chunk_rows} rows, "
           f"read once: {chunk_rows}/{host_rows} = {amp}x." if chunk_rows > host_rows else
           f"the host's {per_host} devices need {host_rows} consecutive rows, {host_rows // chunk_rows} whole chunk(s) "
           f"of {chunk_rows} rows: 1x.")
    return Question(
        "row_restore",
        f"A ({rows}, {cols}) array was saved row-sharded over {saved} devices (one chunk per shard). It is "
        f"restored row-sharded over {restored} devices, {per_host} consecutive devices per "
        "host. If each host read every chunk it needs once (the floor: one read per chunk per host), how many "
        "times the bytes the host needs would it read?",
        amp, "x", how + " (Reading alone, each device would read its whole chunk: a real restore lands between, "
        "Lesson 3.)", facts={**facts, "per_host": per_host}, unit_of_study=3)


def column_runs(rng) -> Question:
    rows, cols, k = int(rng.choice([64, 128, 1000])), int(rng.choice([256, 1024])), int(rng.choice([2, 4, 8]))
    dtype, size = _dtype(rng)
    return Question(
        "column_runs",
        f"A C-order {dtype} tensor of shape ({rows}, {cols}) in a safetensors file is split by columns over {k} "
        "devices. How many separate contiguous byte runs make up one device's shard?",
        rows, "runs",
        f"in C order a row is contiguous; a column shard takes {cols // k} values ({cols // k * size} bytes) from "
        f"each of the {rows} rows, with a gap between rows: {rows} runs. A row shard would be 1 run.",
        facts=dict(shape=(rows, cols), devices=k, dtype=dtype), unit_of_study=4)


def safetensors_offset(rng) -> Question:
    header = int(rng.integers(40, 400)) * 8
    begin = int(rng.integers(0, 2**20)) * 4
    return Question(
        "safetensors_offset",
        f"A safetensors file's 8-byte length field says its JSON header is {header} bytes. A tensor's "
        f"data_offsets are [{begin}, {begin + 4096}]. At which byte of the file does the tensor start?",
        8 + header + begin, "byte offset",
        f"offsets count from the end of the header: 8 + {header} + {begin} = {8 + header + begin:,}.",
        facts=dict(header=header, begin=begin), unit_of_study=4)


def adam_checkpoint(rng) -> Question:
    billions = int(rng.choice([1, 7, 8, 13, 70, 405]))
    dtype, size = _dtype(rng)
    total = billions * size * 3
    return Question(
        "adam_checkpoint",
        f"A model of {billions} billion {dtype} parameters trains with AdamW (optax's adamw: moments in the "
        "parameters' dtype). How big is a checkpoint of its whole training state, in GB (10^9 bytes)? "
        "Ignore the two step counters.",
        total, "GB",
        f"Three arrays per parameter: the parameter, mu and nu: {billions} x 10^9 x {size} bytes x 3 = {total:,} GB. "
        "Counting only the parameters gives a third of it. Mixed precision that keeps float32 moments beside "
        "bfloat16 weights weighs more again: 2 + 4 + 4 bytes per parameter.", rel_tol=0.01,
        facts=dict(billions=billions, dtype=dtype), unit_of_study=5)


def save_time(rng) -> Question:
    gb = int(rng.choice([60, 210, 420, 840, 1215]))
    hosts = int(rng.choice([4, 8, 16, 32, 64]))
    bandwidth = float(rng.choice([0.5, 1.0, 2.0, 4.0]))
    seconds = gb / hosts / bandwidth
    return Question(
        "save_time",
        f"A training state of {gb} GB is sharded FSDP-style over {hosts} hosts, evenly, and each host writes its "
        f"share to storage at {bandwidth:g} GB/s, all at once. How many seconds does the write take, at best?",
        seconds, "s",
        f"The slowest host sets the time: each writes {gb} / {hosts} = {_fmt(gb / hosts)} GB, at {bandwidth:g} GB/s: "
        f"{_fmt(seconds)} s. That is the lower bound: it holds while the storage's total bandwidth keeps up with "
        f"{hosts} x {bandwidth:g} GB/s, and an async save hides it from training except for the copy to host "
        "memory (Lesson 5 times both).", rel_tol=0.02,
        facts=dict(gb=gb, hosts=hosts, bandwidth=bandwidth), unit_of_study=5)


def steps_kept(rng) -> Question:
    every = int(rng.choice([100, 250, 500, 1000]))
    keep = int(rng.choice([2, 3, 5]))
    last = every * int(rng.integers(keep + 2, keep + 20)) + int(rng.integers(1, every))
    oldest = (last // every - keep + 1) * every
    return Question(
        "steps_kept",
        f"A CheckpointManager saves every {every} steps (save_interval_steps={every}, steps counted from 0) with "
        f"max_to_keep={keep}. Training is at step {last:,} and every save has committed. What is the OLDEST step "
        "still on disk?",
        oldest, "step",
        f"Saved steps are the multiples of {every}; the newest at or below {last:,} is {last // every * every:,}, and "
        f"the {keep} newest reach back to {last // every * every:,} - {keep - 1} x {every} = {oldest:,}.",
        facts=dict(every=every, keep=keep, last=last), unit_of_study=5)


def serving_bytes(rng) -> Question:
    billions = int(rng.choice([1, 7, 8, 13, 70, 405]))
    data, model = int(rng.choice([1, 2, 4])), int(rng.choice([8, 16]))
    total = billions * 2 * data
    return Question(
        "serving_bytes",
        f"A model of {billions} billion parameters was trained with AdamW, all in float32; its checkpoint holds the "
        "parameters and both moments. A server restores only the parameters, cast to bfloat16 on restore, onto a "
        f"mesh of (data {data}, model {model}) devices, every spec naming the model axis only. How many GB (10^9 "
        "bytes) do its devices hold, every copy counted?",
        total, "GB",
        f"Only the parameters, 2 bytes each in bfloat16: {billions} x 10^9 x 2 = {billions * 2:,} GB, split over the "
        f"{model} devices of the model axis and held once per data replica ({data}): {total:,} GB. The checkpoint "
        f"holds {billions * 12:,} GB (4 bytes x 3 arrays per parameter); a partial restore reads the parameters' "
        f"{billions * 4:,} GB of it, in float32, a chunk at a time, and never the moments.",
        facts=dict(billions=billions, data=data, model=model), unit_of_study=6)


def state_to_serving(rng) -> Question:
    param_dtype, param_size = ("float32", 4) if rng.random() < 0.5 else ("bfloat16", 2)
    ratio = (param_size + 4 + 4) / 2
    return Question(
        "state_to_serving",
        f"A training state holds {param_dtype} parameters and AdamW's two moments in float32. How many times the "
        "bytes of a bfloat16 copy of the parameters (what a server keeps) does the whole training state weigh?",
        ratio, "x",
        f"Per parameter: {param_size} bytes ({param_dtype}) + 4 (mu) + 4 (nu) = {param_size + 8} bytes, against 2 in "
        f"bfloat16: {ratio:g}x. Restoring the whole state to keep the parameters reads {ratio:g} times what the server "
        "keeps (Lesson 6 measures the peak too).",
        facts=dict(param_dtype=param_dtype), unit_of_study=6)


def replicated_copies(rng) -> Question:
    rows = int(rng.choice([32_000, 50_000, 128_000, 152_000]))
    cols = int(rng.choice([1024, 2048, 4096]))
    devices = int(rng.choice([4, 8, 16]))
    one = rows * cols * 2
    return Question(
        "replicated_copies",
        f"A bfloat16 embedding of shape ({rows:,}, {cols:,}) is replicated (PartitionSpec()) over the {devices} "
        "devices of one host, CPU devices whose memory is the host's. How many bytes of host memory do the device "
        "copies take (answer with a unit if you like, e.g. 4 GiB)?",
        one * devices, "bytes",
        f"One copy is {rows:,} x {cols:,} x 2 = {one:,} bytes; replicated, each of the {devices} devices holds a full "
        f"copy: {one * devices:,} bytes. Lesson 6 measures the growth for 16 devices: serving "
        "specs replicate only what is small.", rel_tol=0.01,
        facts=dict(rows=rows, cols=cols, devices=devices), unit_of_study=6)


def moved_restore_bytes(rng) -> Question:
    rows, cols = int(rng.choice([32_000, 50_000, 128_000])), int(rng.choice([1024, 2048, 4096]))
    dtype, size = _dtype(rng)
    saved = {"data": int(rng.choice([1, 2])), "model": int(rng.choice([2, 4, 8]))}
    new = {"data": 16 // 4, "model": 4} if saved["model"] != 4 else {"data": 2, "model": 8}
    spec = str(rng.choice(["model", "data"]))
    named = new[spec]
    total = rows * cols * size * (16 // named)
    return Question(
        "moved_restore_bytes",
        f"A {dtype} array of shape ({rows:,}, {cols:,}) was saved sharded PartitionSpec('{spec}') on a mesh of "
        f"(data {saved['data']}, model {saved['model']}) devices. It is restored onto 16 CPU devices, a mesh of "
        f"(data {new['data']}, model {new['model']}), with the spec it was saved with. How many bytes do the 16 devices "
        "hold together, every copy counted (answer with a unit if you like, e.g. 2 GiB)?",
        total, "bytes",
        f"The array is {rows:,} x {cols:,} x {size} = {rows * cols * size:,} bytes. On the new mesh '{spec}' splits it "
        f"{named} ways; the axis the spec does not name ({16 // named} devices) replicates each piece: "
        f"{16 // named} copies, {total:,} bytes. The saved mesh plays no part: a restore places as its target says "
        "(Lesson 7 measures what the devices hold).", rel_tol=0.01,
        facts=dict(rows=rows, cols=cols, dtype=dtype, saved=saved, new=new, spec=spec), unit_of_study=7)


def silent_cast(rng) -> Question:
    step = int(rng.integers(2**24 + 1, 2**26)) | 1  # odd: above 2^24, no float32 holds it
    back = int(np.float32(step))
    return Question(
        "silent_cast",
        f"A training state's int32 step counter, {step:,}, is restored into a target that says float32 (a model "
        "rebuilt with every leaf float32). Orbax casts without a word. Which step does the restored counter say?",
        back, "step",
        f"A float32 has a 24-bit significand: from 2^{step.bit_length() - 1} = {2 ** (step.bit_length() - 1):,} to "
        f"2^{step.bit_length()} it holds only every {'second' if step.bit_length() == 25 else 'fourth'} integer, and rounds to the nearest (ties to even): {step:,} becomes "
        f"{back:,}. A run resumed from it repeats or skips {abs(back - step)} step(s) of its data and schedule; "
        "compare the target's dtypes with the checkpoint's metadata before restoring (Lesson 7).",
        facts=dict(step=step), unit_of_study=7)


def unstack_peak(rng) -> Question:
    layers, width = int(rng.choice([16, 32, 48, 64])), int(rng.choice([2048, 4096, 8192]))
    dtype, size = _dtype(rng)
    data, model = [(1, 16), (2, 8), (4, 4), (8, 2)][int(rng.integers(4))]
    stacked = layers * width * width * size
    total = 2 * stacked * data
    return Question(
        "unstack_peak",
        f"A scanned model's stacked {dtype} kernel of shape ({layers}, {width:,}, {width:,}) is restored onto 16 CPU "
        f"devices, a mesh of (data {data}, model {model}), with PartitionSpec(None, 'model'). A migration then slices "
        f"it into {layers} per-layer kernels (each slice a new array, placed as the stack was) and drops the stacked one "
        "only once every slice exists. How many bytes do the devices hold at that moment, every copy counted (answer "
        "with a unit if you like, e.g. 12 GiB)?",
        total, "bytes",
        f"The stack is {layers} x {width:,} x {width:,} x {size} = {stacked:,} bytes, split over the {model} devices "
        f"of 'model' and held once per 'data' replica ({data}): {stacked * data:,} bytes on the devices. The slices "
        f"together are as large again, and both are alive: {total:,} bytes. A lower bound on the host's peak (the "
        "restore keeps more than the arrays), and it stays while the stack is alive, however early each slice is "
        "made. Lesson 7 measures it beside one array at a time (problem 7.4's way: one stack and its layers alive).", rel_tol=0.01,
        facts=dict(layers=layers, width=width, dtype=dtype, data=data, model=model), unit_of_study=7)


KINDS = {f.__name__: f for f in (dense_params, model_bytes, shard_bytes, row_restore, ep_chunks, reshard_ram,
                                 column_runs, safetensors_offset, adam_checkpoint, save_time, steps_kept,
                                 serving_bytes, state_to_serving, replicated_copies, moved_restore_bytes,
                                 silent_cast, unstack_peak)}


def drill(kind: str | None = None, seed: int | None = None) -> Question:
    """A fresh question (of ``kind`` if given; one of :data:`KINDS`)."""
    rng = np.random.default_rng(seed)
    if kind is None:
        kind = str(rng.choice(list(KINDS)))
    if kind not in KINDS:
        raise ValueError(f"no drill {kind!r}; choose one of: {', '.join(KINDS)}")
    return KINDS[kind](rng)


def run(count: int, kinds: list[str] | None, learner: str, seed: int | None = None, ask=input, say=print) -> int:
    """The terminal loop: ``count`` questions; returns how many were right."""
    rng = np.random.default_rng(seed)
    right = answered = 0
    say(f"{count} drill question(s). Answer with a number (units like GiB or x are fine); "
        "Enter or ? shows the worked answer, q stops.")
    for i in range(1, count + 1):
        kind = str(rng.choice(kinds or list(KINDS)))
        q = KINDS[kind](rng)
        say(f"\n[{i}/{count}] {q.text}\n({q.ask})")
        while True:
            try:
                reply = ask("> ").strip()
            except EOFError:
                reply = "q"
            if reply.lower() in ("q", "quit", "exit"):
                say(f"\nStopped: {right}/{answered} right.")
                return right
            if reply in ("", "?"):
                say(f"Worked answer: {q.worked}")
                ok = False
                break
            ok, feedback = q.grade(reply)
            say(feedback)
            if ok is not None:
                break
        answered += 1
        right += bool(ok)
        from autograder import progress

        progress.record_drill(learner, kind, bool(ok), time.monotonic() - q.asked)
    say(f"\nDone: {right}/{answered} right.")
    return right
