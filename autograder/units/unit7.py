"""Unit 7, When the machine or the code changed: its record and its problems. Public: what learners
may see (statements, signatures, hints, public examples). Hidden cases: ``autograder/hidden/unit7.py``,
keyed by function name; references: ``solutions/unit7.py``."""

from __future__ import annotations

import numpy as np

from autograder.declarations import Example, Problem, Unit
from autograder.wall.kinds import AbstractArg, CheckpointArg, MeshArg, OutputFolder, TreeCheckpointArg
from autograder.wall.memory import PLACED_FACTOR, PLACED_SLACK, UNSTACK_FACTOR, UNSTACK_SLACK
from autograder.wall.problem_returns import MigratedTree, PlacedTree, UnstackedTree
from autograder.wall.returns import Raises, Struct

UNIT = Unit(
    number=7,
    title="When the machine or the code changed",
    intro=(
        "A checkpoint outlives the machine and the code that wrote it. Restore one saved by another "
        "number of devices onto this machine's mesh within a memory budget, migrate a checkpoint into a "
        "changed model without a single silent change, compare two checkpoints leaf by leaf, and unstack a "
        "scanned model's layers into per-layer ones one array at a time. Each problem comes from failures "
        "practitioners report (Orbax issues #332, #657, #683 and #2972, MaxText PR #3192 and issue #528): the wrong answers that pass without an error are the ones these problems "
        "grade hardest. The lesson is `course/07_changed_machine_or_code.ipynb`."
    ),
    notebook="unit7_changed_machine_or_code.ipynb",
    lesson="07_changed_machine_or_code.ipynb",
    lesson_figures=1,
    # the problem notebook's import cell
    imports=(
        "import math\n"
        "import os\n"
        "\n"
        "import jax\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n"
        "import orbax.checkpoint as ocp\n"
        "from jax.sharding import NamedSharding, PartitionSpec\n"
        "from orbax.checkpoint import v1 as ocp_v1\n"
        "\n"
        "from autograder.notebook import problem"
    ),
)

# A small checkpoint saved by 4 devices, to restore onto 16.
_ON_FOUR = CheckpointArg((("embed", (512, 64), "float32", ("x",)), ("w_in", (64, 256), "bfloat16", (None, "x")),
                          ("norm", (64,), "float32", ())), (("x", 4),), 3)

# An old model of two layers: one renamed, a norm added to it, the other dropped.
_OLD = (("params/embed", (16, 8), "float32", ()), ("params/layer0/kernel", (8, 8), "float32", ()),
        ("params/layer0/bias", (8,), "float32", ()), ("params/layer1/kernel", (8, 8), "float32", ()),
        ("params/layer1/bias", (8,), "float32", ()), ("opt_state/count", (), "int32", ()),
        ("data/tokens_seen", (2,), "int64", ()))
_NEW_TARGET = {"params": {"embed": AbstractArg((16, 8), "float32"),
                          "block0": {"kernel": AbstractArg((8, 8), "float32"), "bias": AbstractArg((8,), "float32"),
                                     "scale": AbstractArg((8,), "float32")}},
               "opt_state": {"count": AbstractArg((), "int32")}, "data": {"tokens_seen": AbstractArg((2,), "int64")}}
_RENAME = {"params/layer0/kernel": "params/block0/kernel", "params/layer0/bias": "params/block0/bias",
           "params/layer1/kernel": None, "params/layer1/bias": None}
_NEW = {"params/block0/scale": np.ones(8, np.float32)}


def _retarget(**params) -> dict:
    """_NEW_TARGET with some of its 'params' entries put in place of its own."""
    return {**_NEW_TARGET, "params": {**_NEW_TARGET["params"], **params}}


_BLOCK0_NO_BIAS = {k: v for k, v in _NEW_TARGET["params"]["block0"].items() if k != "bias"}

# Two small checkpoints of one model: b lacks a bias, has a head, and its embedding cast to bfloat16.
_MODEL = (("params/embed", (16, 8), "float32", ()), ("params/layer0/kernel", (8, 8), "float32", ()),
          ("params/layer0/bias", (8,), "float32", ()), ("step", (), "int32", ()))
_A = TreeCheckpointArg(_MODEL, (("x", 1),), 5)
_B = TreeCheckpointArg(_MODEL, (("x", 1),), 5, (("drop", "params/layer0/bias"), ("add", "params/head", (8, 4), "float32"),
                                                ("cast", "params/embed", "bfloat16")))
# Counters one apart, each the same number as the float of its width (2^24 + 3 rounds to 2^24 + 4 in
# float32, 2^53 + 5 to 2^53 + 4 in float64), and a NaN at the same place on both sides.
_COUNTED = _MODEL + (("tokens_seen", (2,), "int64", ()),)
_NAN = (("set", "params/layer0/kernel", 1, float("nan")),)
_COUNTERS_A = TreeCheckpointArg(_COUNTED, (("x", 1),), 6, _NAN + (("set", "step", 0, 2**24 + 4),
                                                                 ("set", "tokens_seen", 0, 2**53 + 4)))
_COUNTERS_B = TreeCheckpointArg(_COUNTED, (("x", 1),), 6, _NAN + (("set", "step", 0, 2**24 + 3),
                                                                 ("set", "tokens_seen", 0, 2**53 + 5)))
# With rtol 0.1: a kernel scaled by 1.105 (within 0.1 of the larger value, not of the smaller), an
# infinity against 1.0, 1e-12 against 3e-12 (an absolute term would hide them).
_TOLERANT_A = TreeCheckpointArg(_MODEL, (("x", 1),), 7, _NAN + (("set", "params/layer0/bias", 0, 1e-12),
                                                               ("set", "params/embed", 3, float("inf"))))
_TOLERANT_B = TreeCheckpointArg(_MODEL, (("x", 1),), 7, _NAN + (("scale", "params/layer0/kernel", 1.105),
                                                               ("set", "params/layer0/bias", 0, 3e-12),
                                                               ("set", "params/embed", 3, 1.0)))

# A scanned model of two layers (MaxText's names, stacked along axis 1) on a 2 x 8 mesh.
_SCAN_MESH = (("data", 2), ("model", 8))
_SCANNED = TreeCheckpointArg((("params/token_embedder/embedding", (64, 32), "float32", (("data", "model"),)),
                              ("params/decoder/decoder_norm/scale", (32,), "float32", (("data", "model"),)),
                              ("params/decoder/layers/mlp/wi/kernel", (32, 2, 64), "float32", (None, None, ("data", "model"))),
                              ("params/decoder/layers/mlp/wo/kernel", (64, 2, 32), "float32", ("data", None, "model")),
                              ("params/decoder/layers/pre_self_attention_layer_norm/scale", (32, 2), "float32",
                               (("data", "model"),))),
                             _SCAN_MESH, 7)

PROBLEMS = (
    Problem(
        id="7.1",
        function="restore_on_new_mesh",
        signature=("ckpt_dir", "mesh"),
        points=20,
        title="Restore onto another machine's mesh, within a memory budget",
        statement=(
            "`ckpt_dir` holds a checkpoint `{name: array}` saved with `ocp.StandardCheckpointer` by another machine "
            "(4, 8 or 16 devices), each array sharded over a mesh whose axis names are those of `mesh` but whose "
            "sizes differ. `mesh` is this machine's `jax.sharding.Mesh` over its 16 devices. Return "
            "every saved array as a `jax.Array` with its saved dtype and values, each sharded as "
            "`NamedSharding(mesh, spec)` where `spec` is the partition spec it was saved with. The grader measures "
            "your function's own peak host memory from outside (its anonymous memory, sampled): it must stay under "
            f"{PLACED_FACTOR} times the bytes the devices hold once every array is placed so, plus {PLACED_SLACK >> 20} "
            "MiB (replicas count: on CPU devices every device's copy is host memory)."
        ),
        returns=PlacedTree(),
        hints=(
            "A checkpoint records more than shapes and dtypes. `ocp.StandardCheckpointer().metadata(ckpt_dir)` "
            "reads what Orbax noted about each array without loading one: print it on the public example and find, "
            "for each array, the partition spec it was saved with.",
            "Restore the public example with no target and print each array's `.sharding`: which devices hold it? "
            "A restore places arrays where its target says, and with no target that means 'as saved'. A target need "
            "not hold any bytes: JAX can describe an array (shape, dtype, placement) without one.",
            "Work out the budget before choosing a placement: how many bytes does each of the 16 devices hold for "
            "a replicated array, and for one split by its saved spec? A spec names mesh axes, not sizes, so the "
            "saved spec still means something on a mesh of other sizes; and placing an array once, where it ends, "
            "costs less than placing it twice.",
        ),
        examples=(
            Example((_ON_FOUR, MeshArg((("x", 16),))), None, "saved by 4 devices, restored onto 16"),
        ),
        measure_memory=True,
        forbidden=("ckptlab.topology",),
        timeout=60.0,
        difficulty="hard",
        category="orbax",
        seen_in=("Orbax issues #332 and #683 (a restore after a move to fewer devices) and MaxText PR #3192 (a replicated restore on 16 CPU devices, OOM-killed)"),
        tags=("topology", "restore", "memory"),
        why=(
            "Without a target, Orbax looks up the saved device ids, which another machine may lack. The metadata "
            "records each array's shape, dtype and saved spec, and a spec names mesh axes, not sizes, so a target"
            " built from it places every array once, on the new mesh."
        ),
        next_question=(
            "The new machine's mesh names its axes differently from the saved one ('fsdp' where 'data' was): how "
            "would you map the saved specs, and what would catch a wrong mapping?"
        ),
    ),
    Problem(
        id="7.2",
        function="migrate_checkpoint",
        signature=("ckpt_dir", "target", "rename", "new"),
        points=20,
        title="Migrate a checkpoint into a changed model, with no silent change",
        statement=(
            "`ckpt_dir` holds an old model's checkpoint saved with `ocp.StandardCheckpointer` (nested dicts of "
            "arrays). `target` is the new model's abstract tree: nested dicts of `jax.ShapeDtypeStruct`. `rename` "
            "maps a saved leaf's path (its keys joined by '/', e.g. `'params/layer0/kernel'`) to its path in the new "
            "model, or to None to drop it; a saved leaf not in `rename` keeps its path. `new` maps the path of each "
            "new-model leaf the checkpoint does not provide to its initial value (a NumPy array of the target's "
            "shape and dtype; where the checkpoint provides a leaf, its saved value is the one to keep). Return a tree "
            "shaped like `target` whose leaves are arrays (NumPy or JAX) holding the saved values, or `new`'s, each "
            "with the target's dtype (int64 included: JAX runs without x64 here). Raise "
            "`ValueError` naming the leaf's path when a change cannot be made without a silent loss: a target leaf "
            "that neither the checkpoint nor `new` provides (never zero-fill it), a saved leaf with no place in the "
            "new model (not dropped on purpose), or a saved leaf whose shape or dtype is not the target's (never "
            "cast or reshape it)."
        ),
        returns=MigratedTree(),
        raises=("ValueError",),
        hints=(
            "Check first, restore second: the metadata (`ocp.StandardCheckpointer().metadata(ckpt_dir)"
            ".item_metadata.tree`) gives every saved leaf's shape and dtype without reading one.",
            "Flatten both trees to `{'a/b/c': leaf}`; then every rule is a set difference or a comparison of "
            "shape and dtype.",
            "To read only what the new model keeps, restore with a target naming those leaves and "
            "`partial_restore=True` (`ocp.args.PyTreeRestore`); NumPy arrays are fine "
            "(`ocp.RestoreArgs(restore_type=np.ndarray)`).",
        ),
        examples=(
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _NEW_TARGET, _RENAME, _NEW), None,
                    "layer0 renamed block0 with a new scale, layer1 dropped"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _NEW_TARGET, _RENAME, {}),
                    Raises("ValueError", word="scale"), "the same, the new scale's value missing: raise"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _NEW_TARGET,
                     {"params/layer0/kernel": "params/block0/kernel", "params/layer0/bias": "params/block0/bias"}, _NEW),
                    Raises("ValueError", word="params/layer1"),
                    "layer1 neither dropped nor renamed: saved leaves with no place in the new model, raise"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _retarget(embed=AbstractArg((16, 8), "bfloat16")), _RENAME,
                     _NEW), Raises("ValueError", word="params/embed"),
                    "the new model's embed is bfloat16, saved as float32: never cast it, raise"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _retarget(embed=AbstractArg((32, 8), "float32")), _RENAME,
                     _NEW), Raises("ValueError", word="params/embed"),
                    "the new model's embed has 32 rows, 16 saved: never pad it, raise"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4),
                     _retarget(block0={**_NEW_TARGET["params"]["block0"], "bias": AbstractArg((1, 8), "float32")}),
                     _RENAME, _NEW), Raises("ValueError", word="bias"),
                    "the new model's block0 bias is (1, 8), saved (as layer0's) as (8,), the same size: never reshape "
                    "it, raise"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4),
                     _retarget(layer1={"kernel": AbstractArg((8, 8), "float32"), "bias": AbstractArg((8,), "float32")}),
                     _RENAME, {**_NEW, "params/embed": np.zeros((16, 8), np.float32),
                               "params/layer1/kernel": np.full((8, 8), 0.5, np.float32),
                               "params/layer1/bias": np.zeros(8, np.float32)}), None,
                    "new also gives embed, which the checkpoint provides (the saved value stays), and a new layer1 "
                    "under the name of the layer rename dropped (new's values, not the saved ones)"),
            Example((TreeCheckpointArg(_OLD, (("x", 1),), 4), _retarget(block0=_BLOCK0_NO_BIAS),
                     {**_RENAME, "params/layer0/bias": "params/block0/b"}, _NEW),
                    Raises("ValueError", word="params/layer0/bias"),
                    "layer0's bias renamed to params/block0/b, a path the new model lacks: raise, naming it"),
        ),
        timeout=60.0,
        difficulty="hard",
        category="orbax",
        seen_in=("Orbax issue #2972 (a smaller target 'silently loads partial weights'), MaxText PR #4341 (missing weights zero-filled) and int32 counters restored as float32"),
        tags=("migration", "restore", "silent failures"),
        why=(
            "Orbax's cast on restore and `partial_restore` say nothing when they lose a value, so the checks come"
            " first, from the metadata alone: every saved leaf placed or dropped on purpose, every target leaf "
            "provided, every shape and dtype equal. Only then is a partial restore safe."
        ),
        next_question=(
            "After the migration, how would you show that the new model computes what the old one did, and what "
            "control would prove your check can fail?"
        ),
    ),
    Problem(
        id="7.3",
        function="compare_checkpoints",
        signature=("a_dir", "b_dir", "rtol"),
        points=15,
        title="Compare two checkpoints leaf by leaf",
        statement=(
            "`a_dir` and `b_dir` hold checkpoints saved with `ocp.StandardCheckpointer` (nested dicts of arrays), "
            "say a model before and after a conversion. Return `{'missing': [...], 'extra': [...], 'mismatched': "
            "[...], 'differing': [...]}`, each a sorted list of leaf paths (keys joined by '/'): leaves of a that b "
            "lacks; leaves of b that a lacks; leaves in both whose shape or dtype differs; and leaves in both, of "
            "the same shape, holding a value that differs. Two numbers x and y differ when |x - y| > rtol * max(|x|, "
            "|y|) (no absolute term), except that NaN equals NaN and an infinity equals only itself. Two leaves "
            "of integers are compared exactly, whatever `rtol` (a float64 holds every integer only up to 2^53). A "
            "cast leaf is mismatched whether or not its values are within the tolerance."
        ),
        returns=Struct(("record", (("missing", ("list", "str")), ("extra", ("list", "str")),
                                   ("mismatched", ("list", "str")), ("differing", ("list", "str"))))),
        hints=(
            "Both trees' metadata (`ocp.StandardCheckpointer().metadata(path).item_metadata.tree`) answers the "
            "first three lists without reading a value.",
            "For the values, read one leaf at a time from each checkpoint (a partial restore naming that leaf "
            "alone, as NumPy): two whole models need not be in memory together.",
            "`np.allclose` has an absolute term (atol=1e-8) and is relative to its second argument; a float64 holds "
            "every integer only up to 2^53. Write the comparison the statement defines.",
        ),
        examples=(
            Example((_A, _B, 0.0), {"missing": ["params/layer0/bias"], "extra": ["params/head"],
                                    "mismatched": ["params/embed"], "differing": ["params/embed"]},
                    "a bias dropped, a head added, the embedding cast to bfloat16 (rtol 0)"),
            Example((_A, _B, 0.01), {"missing": ["params/layer0/bias"], "extra": ["params/head"],
                                     "mismatched": ["params/embed"], "differing": []},
                    "the same with rtol 0.01: the cast is within it"),
            Example((_COUNTERS_A, _COUNTERS_B, 0.0), {"missing": [], "extra": [], "mismatched": [],
                                                      "differing": ["step", "tokens_seen"]},
                    "an int32 step above 2^24 and an int64 count above 2^53, each one apart (as floats of their width, "
                    "the same number); a NaN at the same place on both sides (rtol 0)"),
            Example((_TOLERANT_A, _TOLERANT_B, 0.1), {"missing": [], "extra": [], "mismatched": [],
                                                      "differing": ["params/embed", "params/layer0/bias"]},
                    "rtol 0.1: a kernel scaled by 1.105 (within 0.1 of the larger value), with a NaN on both sides; "
                    "an infinity against 1.0; 1e-12 against 3e-12"),
        ),
        forbidden=("ckptlab.tool",),  # the course's own checkpoint tool (its diff among them)
        timeout=60.0,
        difficulty="medium",
        category="debugging",
        tags=("inspection", "comparison"),
        why=(
            "The metadata answers missing, extra and mismatched without reading a value. Values need a "
            "definition: relative, symmetric in x and y, no absolute term, NaN equal to NaN, integers compared "
            "exactly; one leaf at a time keeps both models out of memory."
        ),
        next_question=(
            "Two 1 TB checkpoints must be compared every night: how would you make that cheap without missing a "
            "changed value?"
        ),
    ),
    Problem(
        id="7.4",
        function="unstack_layers",
        signature=("ckpt_dir", "out_dir", "mesh", "groups", "scan_axis"),
        points=20,
        title="Unstack scanned layers into per-layer ones, one array at a time",
        statement=(
            "`ckpt_dir` holds a scanned model's checkpoint saved with `ocp.StandardCheckpointer` on `mesh` (this "
            "machine's 16 devices): nested dicts, named as MaxText names them. `groups` lists the paths of its stacked "
            "subtrees (keys joined by '/', e.g. `'params/decoder/layers'`): every leaf under a group holds all the "
            "group's layers, stacked along axis `scan_axis` (never sharded). Write into `out_dir` (it does not exist "
            "yet) an Orbax checkpoint of the same model with one subtree per layer, as a server's code wants it: for "
            "group `g` and layer `i`, the leaf `g/<rest>` becomes `g_i/<rest>`, its index `i` along `scan_axis`, saved "
            "as a `jax.Array` placed as `NamedSharding(mesh, spec)` where `spec` is the stacked leaf's saved spec "
            "without its scan-axis entry. Every leaf outside the groups is saved as it was (values, dtype, spec); no "
            "stacked leaf remains. The grader restores what you wrote with `ocp.v1.load(out_dir)` in a "
            "worker of its own, and measures your function's own memory from outside (its anonymous memory, "
            f"sampled): it must stay under {UNSTACK_FACTOR} times the bytes the devices hold of the checkpoint's largest "
            f"array placed as saved (replicas count), plus {UNSTACK_SLACK >> 20} MiB. What you return is not looked at."
        ),
        returns=UnstackedTree(),
        hints=(
            "The metadata (`ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree`) gives every array's "
            "shape, dtype and saved spec (`.sharding.partition_spec`) before a byte is read; a spec may be shorter "
            "than the array's rank (the missing entries are None).",
            "Count the budget first: a few times the largest array's bytes, so neither the whole model nor every "
            "layer of one stack may be held at once. Orbax can restore part of a tree (`partial_restore` in "
            "`ocp.args.PyTreeRestore`) and can hand an array back as NumPy instead of placed on the devices "
            "(`ocp.RestoreArgs`): work out what each choice costs on 16 CPU devices.",
            "On paper, for one stacked leaf of shape (d, L, f) stacked along axis 1: what are layer i's shape, its "
            "new path and its spec? Which leaves belong to group `g`: is a leaf whose path merely begins with the "
            "characters of `g` one of them? Then check your answers against the statement.",
            "Orbax v1 can write a checkpoint in pieces: `ocp_v1.partial` adds arrays to a checkpoint in the making "
            "and finalizes it once. What must be written, and what let go, before the next array is read for the "
            "peak to stay near one array?",
        ),
        examples=(
            Example((_SCANNED, OutputFolder(), MeshArg(_SCAN_MESH), ["params/decoder/layers"], 1), None,
                    "two layers stacked along axis 1, on a 2 x 8 mesh"),
            Example((TreeCheckpointArg(_SCANNED.arrays[:2] + (
                        ("params/decoder/layers/mlp/wi/kernel", (3, 32, 64), "float32", (None, None, ("data", "model"))),
                        ("params/decoder/layers_post_norm/scale", (3, 32), "float32", (None, ("data", "model")))), _SCAN_MESH,
                       8),
                     OutputFolder(), MeshArg(_SCAN_MESH), ["params/decoder/layers"], 0), None,
                    "three layers stacked along axis 0, beside a leaf of another name that begins like the group's "
                    "(layers_post_norm): not under the group, saved as it was"),
        ),
        measure_memory=True,
        mode="readback",
        forbidden=("ckptlab.unstacking", "ckptlab.serving"),
        timeout=90.0,
        difficulty="hard",
        category="orbax",
        seen_in=("MaxText's `generate_param_only_checkpoint.py` (`force_unroll`: the whole training state restored, then every layer sliced while the stack is alive) and MaxText issue #528 (layers scanned along `param_scan_axis` 1, not 0)"),
        tags=("migration", "scanned layers", "memory"),
        why=(
            "Peak memory is what is alive at once: one array restored to the host as NumPy (one copy, however "
            "many devices held it), its layers written with Orbax's partial save, both let go before the next. A "
            "layer's spec is the stack's without its scan-axis entry."
        ),
        next_question=(
            "For a 400B-parameter scanned model, how much host memory does restoring the whole state first take, "
            "and how would you split the conversion over several hosts?"
        ),
    ),
)
