"""Hidden cases for Unit 5 (checkpointing a training run). Problem 5.1's meshes use all 16
devices; problem 5.2's checkpoint roots are made by real savers the grader kills
(:mod:`ckptlab.preempt`), and its expected step is what Orbax itself says of them."""

from __future__ import annotations

import functools
import math
import os
import threading

from autograder.hidden import Case, Hidden
from autograder.wall.kinds import PreemptedRootArg, RunFolder
from autograder.wall.returns import ExactArrays

ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
MESHES_2D = ({"data": 4, "model": 4}, {"data": 2, "model": 8}, {"data": 8, "model": 2})


def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


# ---------------------------------------------------------------------------------------------
# 5.1 training_state_bytes

def _state_cases(rng):
    dph = lambda: _pick(rng, (2, 4, 8))  # noqa: E731 - devices per host, drawn per case
    k, m = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    fsdp = {"fsdp": 16}
    mesh = _pick(rng, MESHES_2D)
    d, mo = mesh["data"], mesh["model"]
    # Odd multiples of the mesh's axes: a 2-D kernel no dimension of which 16 divides, so that an
    # optimizer's array taken as replicated (not sharded as its parameter) weighs otherwise per host.
    ko, mko = _pick(rng, (1, 3)), _pick(rng, (1, 3))
    # Hosts that write nothing: a shard no dimension of which its data replicas divide (its first
    # replica writes it: the mesh's first row of devices, all on host 0), beside an array replicated
    # whole with odd dimensions (device 0 writes it).
    def idle(dtype, mu_dtype, accumulate):
        mesh = _pick(rng, MESHES_2D)
        per_host = _pick(rng, tuple(n for n in (2, 4, 8) if n >= mesh["model"]))
        odd = lambda: int(_pick(rng, (1, 3, 5, 7)))  # noqa: E731
        params = {"w": ((mesh["model"] * odd(), 2 + odd()), dtype), "gate": ((2 + odd(), 2 + odd()), "float32")}
        return Case("idle_hosts", (params, {"w": ("model",), "gate": ()}, mesh, per_host, mu_dtype, accumulate))

    idle_cases = [idle(_pick(rng, ("float32", "bfloat16")), _pick(rng, ("float32", None)), _pick(rng, (1, 2))),
                  idle(_pick(rng, ("float32", "float16")), _pick(rng, ("bfloat16", None)), _pick(rng, (1, 4)))]
    return idle_cases + [
        Case("fsdp", ({"kernel": ((16 * k, 8 * m), "float32"), "bias": ((8 * m,), "float32")},
                      {"kernel": ("fsdp",), "bias": ()}, fsdp, dph(), None, 1)),
        Case("two_d", ({"embed": ((d * mo * k, 4 * m), "float32"), "kernel": ((d * ko, mo * mko), "float32"),
                        "bias": ((mo * m,), "float32")},
                       {"embed": (("data", "model"),), "kernel": ("data", "model"), "bias": ("model",)}, mesh, dph(),
                       "bfloat16", 1)),
        # bfloat16 parameters, their first moment kept in float32 (the second is not)
        Case("mu_float32", ({"kernel": ((16 * k, 4 * m), "bfloat16"), "scale": ((16 * m,), "float32")},
                            {"kernel": (None, None), "scale": ("fsdp",)}, fsdp, dph(), "float32", 1)),
        # gradient accumulation beside bfloat16 parameters: the accumulator is float32
        Case("accumulate", ({"kernel": ((d * ko, mo * mko), "bfloat16"), "bias": ((mo * m,), "float32")},
                            {"kernel": ("data", "model"), "bias": ("model",)}, mesh, dph(), None,
                            _pick(rng, (2, 4, 8)))),
        # (3, 5) has no dimension the 16 replicas divide: replica 0 writes it all, on host 0.
        Case("unsplittable", ({"kernel": ((16 * k, 16), "float16"), "gate": ((3, 5), "float32")},
                              {"kernel": ("fsdp", None), "gate": ()}, fsdp, dph(), _pick(rng, ("float32", None)),
                              _pick(rng, (1, 4)))),
        # (a bfloat16 kernel: MultiSteps accumulates its gradients in float32 all the same)
        Case("one_host", ({"kernel": ((d * k, mo * m), "bfloat16")}, {"kernel": (None, "model")}, mesh, 16, None, 2)),
    ]


def _state_model(args, *, parameters=True, moments=True, mu=None, nu=None, accumulator="float32", counters=True):
    """Bytes per host under a model of the state (the truth by default; the diagnosis tries mistaken
    ones): each parameter's arrays in their dtypes (``mu``/``nu``/``accumulator``: a dtype, or
    "param" for the parameter's own; ``accumulator`` None: no accumulator), and the scalars."""
    from solutions.unit2 import bytes_written_per_host

    params, specs, mesh, per_host, mu_dtype, accumulate = args
    out = {h: 0 for h in range(math.prod(mesh.values()) // per_host)}
    for name, (shape, dtype) in params.items():
        dtypes = [dtype] if parameters else []
        own = lambda choice, default, dtype=dtype: dtype if choice == "param" else (choice or default)  # noqa: E731
        if moments:
            dtypes += [own(mu, mu_dtype or dtype), own(nu, dtype)]
        if accumulate > 1 and accumulator:
            dtypes.append(own(accumulator, dtype))
        for dt in dtypes:
            for h, n in bytes_written_per_host(shape, ITEMSIZE[dt], mesh, specs[name], per_host).items():
                out[h] += n
    if counters:  # AdamW's count, the optimizer's step; MultiSteps' mini_step and gradient_step
        out[0] += 8 + (8 if accumulate > 1 else 0)
    return out


def _diagnose_state(args, actual, expected):
    hosts = math.prod(args[2].values()) // args[3]
    if set(actual) != set(range(hosts)):
        return "hosts"
    mu_dtype, accumulate = args[4], args[5]
    mistakes = [("params_only", {"moments": False, "accumulator": None}), ("moments_only", {"parameters": False}),
                ("params_only", {"moments": False, "accumulator": None, "counters": False}),
                ("moments_only", {"parameters": False, "counters": False}), ("scalars", {"counters": False})]
    if mu_dtype:
        mistakes += [("mu_dtype_ignored", {"mu": "param"}), ("nu_in_mu_dtype", {"nu": mu_dtype})]
    if accumulate > 1:
        mistakes += [("no_accumulator", {"accumulator": None}), ("accumulator_dtype", {"accumulator": "param"})]
    matches = set()
    for category, change in mistakes:
        wrong = _state_model(args, **change)
        # (scalars: also AdamW's counters counted and MultiSteps' forgotten)
        half = category == "scalars" and accumulate > 1 and all(actual[h] == wrong[h] + 8 * (h == 0) for h in actual)
        if wrong != expected and (actual == wrong or half):
            matches.add(category)
    # Two mistakes can weigh the same (bfloat16 moments and a float32 accumulator, or the other way
    # round): then this case names neither, and the other failing cases decide.
    if len(matches) == 1:
        return matches.pop()
    if matches:
        return None
    if sum(actual.values()) > sum(expected.values()):
        return "replicas"
    return None


STATE = Hidden(
    generate=_state_cases,
    fixed=(Case("edge", ({"w": ((16,), "float32")}, {"w": ()}, {"fsdp": 16}, 8, None, 1)),),
    messages={
        "hosts": "Return an entry for every host, including hosts that write nothing: host ids run from 0 to "
                 "n_devices // devices_per_host - 1.",
        "params_only": "That is the parameters alone. The optimizer keeps more arrays per parameter (AdamW's mu "
                       "and nu at least), and they are saved too: a training checkpoint is several times the model.",
        "moments_only": "That counts the optimizer's arrays but not the parameters themselves: the state holds both.",
        "scalars": "Nearly: the state's scalar counters are saved too (AdamW's count, the optimizer's step, and "
                   "MultiSteps' own when it accumulates), 4 bytes each, written once, by replica 0 (on host 0).",
        "mu_dtype_ignored": "mu_dtype is the dtype optax keeps the first moment in: with mu_dtype given, mu is not "
                            "in the parameter's dtype.",
        "nu_in_mu_dtype": "mu_dtype applies to the first moment only: optax keeps the second moment, nu, in the "
                          "parameter's dtype (jax.eval_shape(tx.init, ...) shows it).",
        "no_accumulator": "With accumulate > 1, optax.MultiSteps keeps the gradients it accumulates, one more array "
                          "per parameter, and saves them with the state.",
        "accumulator_dtype": "MultiSteps accumulates gradients in its accumulator_dtype, float32 unless told "
                             "otherwise, not in the parameter's dtype: a bfloat16 parameter's accumulator is float32.",
        "replicas": "More bytes than the state holds: replicated data is written once in total, split among "
                    "its replicas where a dimension divides (problem 2.6), not once per replica or per host.",
        "fsdp": "Wrong for a model sharded FSDP-style on one axis of 16 devices.",
        "two_d": "Wrong on a 2-D mesh (data x model), with a spec entry naming two axes and mu kept in bfloat16.",
        "mu_float32": "Wrong with bfloat16 parameters whose first moment is kept in float32.",
        "accumulate": "Wrong with gradients accumulated over several micro-batches, beside bfloat16 parameters.",
        "unsplittable": "Wrong when a replicated array has no dimension its replicas divide.",
        "one_host": "Wrong with all 16 devices on one host.",
        "idle_hosts": "Wrong when some hosts write nothing (every array's bytes written by devices of host 0).",
        "edge": "Wrong on a small replicated vector.",
    },
    diagnose=_diagnose_state,
    requirements={
        "`tx = optax.adamw(learning_rate, mu_dtype=mu_dtype)`": ("two_d", "mu_float32"),
        "wrapped as `optax.MultiSteps(tx, every_k_schedule=accumulate)` when `accumulate > 1`": (
            "accumulate", "one_host"),
        "Each array of the optimizer's state that belongs to a parameter is sharded as that parameter": (
            "two_d", "accumulate"),
        "scalars are replicated": ("fsdp", "two_d", "mu_float32", "accumulate", "unsplittable", "edge", "idle_hosts"),
        "Return `{host: bytes}` for every host": ("idle_hosts",),
        "devices_per_host consecutive device ids each": ("idle_hosts",),
        "the uncompressed bytes its devices write when Orbax saves the parameters and the optimizer's whole state": (
            "fsdp", "two_d", "mu_float32", "accumulate", "unsplittable", "one_host", "edge", "idle_hosts"),
        "replica-parallel on": ("edge", "mu_float32"),
    },
)


# ---------------------------------------------------------------------------------------------
# 5.2 latest_restorable_step: each root is a real saver killed at a point of a save.

def _root(rng, damage=(), **spec):
    spec.setdefault("seed", int(rng.integers(0, 1000)))
    return (PreemptedRootArg(tuple(sorted(spec.items())), damage=tuple(damage)),)


def _preempted_cases(rng):
    def keep_and_committed(most):
        """max_to_keep, and how many committed steps the kill waits for (never more than are kept)."""
        keep = _pick(rng, (2, 3, None))
        return keep, int(rng.integers(1, min(most, keep or most) + 1))

    k1, c1 = keep_and_committed(4)
    k2, c2 = keep_and_committed(4)
    k3, c3 = keep_and_committed(3)
    return [
        Case("rename_mid_save", _root(rng, kill="tmp", min_committed=c1, save_every=_pick(rng, (1, 2)), max_to_keep=k1)),
        Case("in_place_mid_save", _root(rng, kill="uncommitted", commit_file=True, min_committed=c2, max_to_keep=k2)),
        Case("in_place_written", _root(rng, kill="written", commit_file=True, min_committed=c3,
                                       save_every=_pick(rng, (1, 3)), max_to_keep=k3)),
        Case("first_save", _root(rng, kill="first", commit_file=bool(rng.integers(0, 2)))),
        Case("finished", _root(rng, kill="none", steps=int(rng.integers(3, 9)), save_every=_pick(rng, (1, 2)),
                               max_to_keep=2)),
        Case("any_point", _root(rng, kill="delay", delay=float(rng.uniform(0.3, 0.7)), steps=100000,
                                commit_file=bool(rng.integers(0, 2)), max_to_keep=_pick(rng, (2, 3, None)))),
        # Committed steps whose `state` item does not restore: taken away (the step still looks
        # committed), or its arrays' data gone while its records read (its metadata says all is
        # well). The step before the newest one also lacks its `data` item: the answer all the same.
        Case("state_missing", _root(rng, kill="none", steps=int(rng.integers(4, 6)), max_to_keep=None,
                                    commit_file=bool(rng.integers(0, 2)), damage=(("state_removed", 1), ("data_removed", 2)))),
        Case("state_unreadable", _root(rng, kill="none", steps=int(rng.integers(4, 6)), max_to_keep=None,
                                       commit_file=bool(rng.integers(0, 2)),
                                       damage=(("state_unreadable", int(rng.integers(1, 3))),))),
        # Every committed step unrestorable, though each looks committed: nothing to resume from.
        Case("none_restorable", _root(rng, kill="none", steps=int(rng.integers(2, 4)), max_to_keep=None,
                                      commit_file=bool(rng.integers(0, 2)), damage=(("state_unreadable", 0),))),
        # The newest step's `data` item gone, its `state` whole: it is still the step whose state restores.
        Case("data_missing", _root(rng, kill="none", steps=int(rng.integers(3, 6)), max_to_keep=_pick(rng, (3, None)),
                                   commit_file=bool(rng.integers(0, 2)), damage=(("data_removed", 1),))),
    ]


def restorable_step(ckpt_root):
    """The truth, from Orbax: the latest step that Orbax's own check, told the object-store protocol
    (which both protocols' finished saves pass), calls finalized, whose ``state`` restores, and
    holds the state the saver saved at that step (its ``step`` leaf)."""
    import orbax.checkpoint as ocp
    from orbax.checkpoint import options as ocp_options

    commit_file = ocp_options.AtomicityOptions(mode=ocp_options.AtomicityMode.COMMIT_FILE)
    steps = sorted((int(n) for n in os.listdir(ckpt_root) if n.isdigit()), reverse=True)
    for step in steps:
        folder = os.path.join(ckpt_root, str(step))
        if not ocp.step.is_checkpoint_finalized(folder, atomicity_options=commit_file):
            continue
        try:
            restored = ocp.StandardCheckpointer().restore(os.path.join(folder, "state"))
        except Exception:  # noqa: BLE001 - a step that does not restore is not the answer
            continue
        if int(restored["step"]) == step:  # the state the saver saved at that step
            return step
    return None


def _diagnose_preempted(args, actual, expected):
    damaged = {kind for kind, _ in getattr(args[0], "damage", ())}
    if expected is None:
        if actual is not None and damaged & {"state_removed", "state_unreadable"}:
            return "unrestorable"
        return "none_committed" if actual is not None else None
    if actual is None:
        return "missed"
    if actual > expected:
        return "unrestorable" if damaged & {"state_removed", "state_unreadable"} else "uncommitted"
    return "whole_step" if "data_removed" in damaged else "older"


PREEMPTED = Hidden(
    generate=_preempted_cases,
    messages={
        "uncommitted": "You returned a step whose save never committed: a '<step>.orbax-checkpoint-tmp' folder, "
                       "or a '<step>/' folder without commit_success.txt (a save written in place, cut short). "
                       "Resuming from it restores a half-written state, or fails.",
        "none_committed": "No save in this folder ever committed: return None (start from scratch), not a step.",
        "missed": "A committed step that restores is there: return it rather than None.",
        "older": "You returned an older step than the latest committed one that restores: resuming there "
                 "throws away training that was safely saved.",
        "unrestorable": "You returned a step that looks committed (its folder and commit_success.txt are there) "
                        "but whose `state` item does not restore: a commit marker, a folder listing or readable "
                        "metadata is not a restore. Restore the step's `state` item, and take a failure as 'not "
                        "this step'.",
        "whole_step": "You returned an older step than the latest one whose `state` item restores: the question is "
                      "the state; a step whose other item is damaged or gone still holds a state to resume from "
                      "(restore the `state` item alone).",
        "rename_mid_save": "Wrong on a folder killed while a save was in its temporary folder (POSIX protocol).",
        "in_place_mid_save": "Wrong on a folder killed while a save was being written in place.",
        "in_place_written": "Wrong on a folder killed after a step's items were written in place but before its "
                            "commit file.",
        "first_save": "Wrong on a folder killed during its first save.",
        "finished": "Wrong on a folder whose saver finished.",
        "any_point": "Wrong on a folder killed at an arbitrary moment.",
        "state_missing": "Wrong on a folder whose saver finished, where a committed step's items are not all there.",
        "state_unreadable": "Wrong on a folder whose saver finished, where a committed step's arrays do not read back.",
        "none_restorable": "Wrong on a folder where no committed step restores.",
        "data_missing": "Wrong on a folder whose saver finished, where a committed step's `data` item is gone.",
    },
    diagnose=_diagnose_preempted,
    precedence=("uncommitted", "none_committed"),
    requirements={
        "a step's save committed when its folder is named by the step alone and holds `commit_success.txt`": (
            "rename_mid_save", "in_place_mid_save", "in_place_written"),
        "Return the latest step (an int) whose save committed": ("finished", "data_missing", "in_place_written"),
        "whose `state` item Orbax restores": ("state_missing", "state_unreadable", "none_restorable", "data_missing"),
        "or None when there is none": ("first_save", "none_restorable"),
    },
    on_exception="The folder is read-only, and a step folder may be empty or half-written: list it with "
                 "os.listdir, and treat any failure to restore a step as 'not this step'.",
    expected=restorable_step,
)


# ---------------------------------------------------------------------------------------------
# 5.3 train_with_preemption: the grader kills the learner's run (engine/preempted.py) and starts
# it again; each plan holds a kill after a commit (a run that never saves is never killed there).

def _run_cases(rng):
    # Two kills, one of each kind (while a save commits, and after one), in either order; then the
    # grader restores the latest committed step and plants another state in it before the last run.
    kills = [("commit", int(rng.integers(1, 3))), ("mid_save", int(rng.integers(1, 3)))]
    rng.shuffle(kills)
    cases = [Case("preempted", (RunFolder(tuple(kills), plant=int(rng.integers(1000, 2**31 - 1))),
                                int(rng.integers(6, 9)), int(rng.integers(0, 1000))))]
    # A shorter run killed once, of either kind, with a state planted of its own: a save of step 2 or
    # 3 under way (a manager's save waits for the one before it: a step committed) or one or two
    # steps committed, so that the last run has a committed step to go on from.
    once = ("commit", int(rng.integers(1, 3))) if rng.integers(0, 2) else ("mid_save", int(rng.integers(2, 4)))
    cases.append(Case("preempted", (RunFolder((once,), plant=int(rng.integers(1000, 2**31 - 1))),
                                    int(rng.integers(4, 7)), int(rng.integers(0, 1000)))))
    return cases


def uninterrupted_run(ckpt_dir, total_steps, seed):
    """The run never interrupted: its parameters, and first_step 0 (where the case plants a state,
    from the plant's table, which holds them too: one trusted process for both)."""
    plant = getattr(ckpt_dir, "plant", 0)  # (files.RunPath)
    if plant:
        return dict(plant_table_of(int(total_steps), int(seed), plant)["uninterrupted"]), 0
    return dict(_uninterrupted_params(int(total_steps), int(seed))), 0


_TABLES: dict = {}
_TABLES_LOCK = threading.Lock()


def plant_table_of(total_steps: int, seed: int, plant: int) -> dict:
    """sandbox/trusted.planted_runs for one case, computed once (the expected value and the plant
    ask for it from two threads at once: the second waits for the first). Read-only."""
    from autograder.sandbox.trusted import planted_runs

    key = (total_steps, seed, plant)
    with _TABLES_LOCK:
        if key not in _TABLES:
            if len(_TABLES) >= 16:
                _TABLES.pop(next(iter(_TABLES)))
            table = planted_runs(total_steps, seed, plant)
            parts = list(table.values())
            while parts:
                part = parts.pop()
                if isinstance(part, dict):
                    parts.extend(part.values())
                else:
                    part.flags.writeable = False
            _TABLES[key] = table
        return _TABLES[key]


@functools.lru_cache(maxsize=64)
def _uninterrupted_params(total_steps: int, seed: int) -> dict:
    """Computed as a worker computes it: in a worker of its own (sandbox/trusted.trusted_worker;
    this process's compile with other flags, and differ in the last bits). Trusted code: the
    course's own training module. Kept for the grading process's life (a class shares the public
    example's, and a learner graded again, its own), read-only."""
    from autograder.sandbox.trusted import uninterrupted_params

    params = uninterrupted_params(total_steps, seed)
    for value in params.values():
        value.flags.writeable = False
    return params


def expected_after_run(expected, out):
    """Where the grader planted a state before the last run (engine/preempted.plant_state): the
    parameters a run restoring it ends with; the uninterrupted run's stay third, whether a run
    saved again a step it should have resumed from fourth, and the parameters of a run that
    restored the planted state but not the data's position fifth (None where nothing was planted;
    for diagnoses)."""
    params, first = expected
    planted = out.get("plant_expected")
    return (params if planted is None else planted, first, params, bool(out.get("restarted")),
            None if planted is None else out.get("plant_fresh_data"))


def run_outcome(args, out):
    if out.get("plant_problem"):
        return out["plant_problem"]
    if out.get("restarted"):
        return "restarted"
    if out.get("preempted", 0) < out.get("planned", 0) or not out.get("committed_after"):
        return "never_preempted"  # (or nothing saved at all)
    if int(out["value"][1]) != out.get("resumed_at"):
        # With a state planted in the latest committed step, right parameters say the run restored that step:
        # only the number it returned is wrong.
        return "wrong_first_step" if out.get("planted_at") is not None else "not_resumed"
    if out.get("committed_after", 0) < args[1]:
        return "lost_final_save"
    return None


def diagnose_run(args, actual, expected):
    if set(actual[0]) != set(expected[0]):
        return "keys"
    if len(expected) > 3 and expected[3]:
        return "restarted"  # (a run that started over ends as if nothing had been planted, too)
    if len(expected) > 4 and expected[4] is not None and ExactArrays().equal(actual[0], expected[4]):
        return "position_lost"  # the planted state restored, the batches drawn again from epoch 0
    if len(expected) > 2 and expected[0] is not expected[2] and ExactArrays().equal(actual[0], expected[2]):
        return "not_from_disk"  # a state was planted, and the run ended as if none had been
    return None


RUN = Hidden(
    generate=_run_cases,
    messages={
        "keys": "Return training.params_of(model) as params: a dict from each parameter's path to its value.",
        "not_resumed": "Right parameters, but the last run did not start from the latest committed step (its "
                       "first_step says where it started): after a kill, restore the latest step and train only "
                       "the steps that remain; a CheckpointManager skips saves of steps it already holds, so "
                       "training everything again still ends right, but it is not a resume.",
        "wrong_first_step": "Right parameters, and your last run went on from what the latest committed step holds "
                            "(it ends as a run restoring that step does), but the first_step it returned is another "
                            "number: return the step this call started training from, the step it restored (0 in a "
                            "fresh folder), not the last step trained or the next one.",
        "never_preempted": "Right parameters, but the grader could not preempt your run where it planned to: "
                           "save a checkpoint after every step (the grader kills your process while saves commit "
                           "and after them), and wait for the last one before returning.",
        "plant_unreadable": "The grader could not restore your latest committed step: before the last restart it "
                            "restores that step's `state` item itself, with Orbax. Save real checkpoints, each step "
                            "holding the two items `state` and `data`.",
        "plant_not_state": "Your latest committed step does not hold the training state after that many steps: "
                           "before the last restart the grader restores its `state` item and compares it, leaf by "
                           "leaf, with `training.train_state(model, optimizer)` after as many training steps. Save "
                           "step s + 1 right after training step s, the whole state.",
        "not_from_disk": "Your last run did not go on from what its latest committed step holds: before it started, "
                         "the grader replaced that step's state with another valid one, and your run ended as if it "
                         "had not (it trained again from scratch, or from a copy kept elsewhere). Restore the state "
                         "and the position from the step itself.",
        "position_lost": "A resumed run must continue the data where it stopped: yours restored the training "
                         "state, then trained on the batches of a fresh pipeline (epoch 0 again). Save the "
                         "pipeline's position, `batches.get_state()`, as each step's `data` item, and after "
                         "restoring the step put it back with `batches.set_state(...)`.",
        "restarted": "Right parameters, but after a kill your run saved again a step that was already committed: "
                     "it started over instead of resuming from the latest committed step.",
        "lost_final_save": "Right parameters, but the last save was lost: your function returned while it was "
                           "still committing, and the process ended with its answer (as a job ends when its work "
                           "is done), taking the background commit with it. Call wait_until_finished() before "
                           "returning.",
        "preempted": "Killed and started again, your run does not end with the parameters of a run never "
                     "interrupted: restore the whole training state (the optimizer's moments and step too, not "
                     "only the parameters) and the batches' position, and train only the steps that remain "
                     "(step s holds the state after s steps).",
    },
    diagnose=diagnose_run,
    check_outcome=run_outcome,
    requirements={
        "a run must then go on from the latest committed step": ("preempted",),
        "training only the steps that remain": ("preempted",),
        "on the batches that come next": ("preempted",),
        "first_step being the step this call started training from": ("preempted",),
        "its last step must be committed on disk": ("preempted",),
        "compares what the last run returns, bit for bit, with a run never interrupted": ("preempted",),
        "the last run must go on from what the step holds": ("preempted",),
    },
    expected_after=expected_after_run,
    plant_table=plant_table_of,
    on_exception="After a kill the folder holds the steps that committed, and perhaps a temporary folder of "
                 "the save that was cut short: create the CheckpointManager, ask it for latest_step(), and "
                 "restore that step (the state with a target built from your own state, the data item as JSON).",
    expected=uninterrupted_run,
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "training_state_bytes": STATE,
    "latest_restorable_step": PREEMPTED,
    "train_with_preemption": RUN,
}
