"""Hidden cases for Unit 1 (parameter accounting)."""

from __future__ import annotations

import numpy as np

from autograder.hidden import Case, Hidden


def _x(rng, n, d):
    return rng.standard_normal((n, d)).astype(np.float32)


def _dims(rng, lo=2, hi=48):
    d = int(rng.integers(lo, hi))
    n = int(rng.integers(1, 9))
    if n == d:
        n += 1  # keep batch size and input dim apart, so x.shape[0] mistakes show
    return n, d


def _layer_cases(rng, order):
    """Dense/Linear cases; ``order(seed, x, shards, features)`` puts args in the problem's order."""
    cases = []
    while len([c for c in cases if c.category == "even"]) < 3:
        n, d = _dims(rng)
        f = int(rng.integers(1, 40))
        total = d * f + f
        divisors = [k for k in range(2, 17) if total % k == 0]
        if divisors:
            cases.append(Case("even", order(float(rng.integers(0, 1000)), _x(rng, n, d), float(rng.choice(divisors)), float(f))))
    while len([c for c in cases if c.category == "uneven"]) < 3:
        n, d = _dims(rng)
        f = int(rng.integers(1, 40))
        total = d * f + f
        shards = [k for k in range(3, 17) if total % k]
        if shards:
            cases.append(Case("uneven", order(float(rng.integers(0, 1000)), _x(rng, n, d), float(rng.choice(shards)), float(f))))
    n, d = int(rng.integers(2, 5)), int(rng.integers(512, 1024))
    cases.append(Case("large", order(float(rng.integers(0, 1000)), _x(rng, n, d), 16.0, float(rng.integers(256, 512)))))
    return cases


def _diagnose_layer(args, actual, expected, d, n, f, shards):
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if np.allclose(a, e[::-1]) and not np.allclose(e, e[::-1]):
        return "order"
    if np.isclose(a[0], d * f) and d * f != e[0]:
        return "bias"
    if np.isclose(a[0], n * f + f) and n != d:
        return "input_dim"
    if np.isclose(a[0], e[0]):
        if np.isclose(a[1], e[0] // shards) and e[0] % shards:
            return "int_division"
        return "per_shard"
    return None


_LAYER_MESSAGES = {
    "order": "The two numbers look swapped: return [total_params, per_shard] in that order.",
    "bias": "total_params is too small: it looks like only the kernel was counted. The layer also has a "
            "bias of shape (features,); count every leaf of the parameter tree.",
    "input_dim": "total_params looks computed from x.shape[0], the batch size. The kernel's input dimension "
                 "is the last axis of x, x.shape[-1].",
    "int_division": "per_shard must use float division: total_params / num_shards (15 / 4 is 3.75), not //.",
    "per_shard": "total_params is right but per_shard is not: per_shard = total_params / num_shards.",
    "edge": "Wrong on an edge case (a single shard, a single feature, a single input or a batch of one). "
            "Nothing in the count should depend on the batch size.",
    "even": "Wrong on ordinary inputs where num_shards divides total_params: re-check the parameter count.",
    "uneven": "Wrong when num_shards does not divide total_params: per_shard is then a fraction.",
    "large": "Wrong on a large layer (hundreds of thousands of parameters): check nothing is truncated "
             "or computed in a narrow integer type.",
}


def _layer_counts(x, features, num_shards):
    """What the references get from Flax (the layer's init under ``eval_shape``), by arithmetic:
    a kernel of shape (x.shape[-1], features) and a bias of shape (features,)."""
    features = int(features)
    total = np.shape(x)[-1] * features + features
    return np.array([total, total / int(num_shards)], dtype=np.float64)


_CAST = ("Numbers arrive as floats (3.0, not 3): cast seed, num_shards and features with int() before "
         "building the layer or the PRNG key.")


DENSE = Hidden(
    generate=lambda rng: _layer_cases(rng, lambda s, x, k, f: (s, x, k, f)),
    fixed=(
        Case("edge", (0.0, np.ones((1, 1), np.float32), 1.0, 1.0)),
        Case("edge", (5.0, np.ones((4, 7), np.float32), 1.0, 1.0)),
        Case("edge", (2.0, np.ones((3, 1), np.float32), 5.0, 9.0)),
    ),
    messages=_LAYER_MESSAGES,
    diagnose=lambda args, a, e: _diagnose_layer(args, a, e, args[1].shape[-1], args[1].shape[0], int(args[3]), int(args[2])),
    on_exception=_CAST,
    expected=lambda seed, x, num_shards, features: _layer_counts(x, features, num_shards),
    requirements={
        # (the batch size N differs from in_dim in every generated case: _dims keeps them apart)
        "Initialise `nn.Dense(features)` with `jax.random.PRNGKey(seed)` on `x` of shape (N, in_dim)": (
            "even", "uneven", "large"),
        "Return a 1-D array of shape (2,): `[total_params, per_shard]`": ("even", "uneven", "large"),
        "`per_shard = total_params / num_shards` (float division)": ("uneven",),
        "`seed`, `num_shards` and `features` arrive as floats: cast them to int": ("edge", "even", "uneven", "large"),
    },
)


def _diagnose_linear(args, actual, expected):
    seed, x, f, shards = args
    d = x.shape[-1]
    a = np.asarray(actual, np.float64)
    swapped_total = d * int(shards) + int(shards)
    if np.isclose(a[0], swapped_total) and swapped_total != expected[0]:
        return "arg_order"
    return _diagnose_layer(args, actual, expected, d, x.shape[0], int(f), int(shards))


NNX_LINEAR = Hidden(
    generate=lambda rng: _layer_cases(rng, lambda s, x, k, f: (s, x, f, k)),
    fixed=(
        Case("edge", (0.0, np.ones((1, 1), np.float32), 1.0, 1.0)),
        Case("edge", (5.0, np.ones((4, 7), np.float32), 1.0, 1.0)),
        Case("edge", (2.0, np.ones((3, 1), np.float32), 9.0, 5.0)),
    ),
    messages={"arg_order": "features and num_shards look swapped: orbax_save_count takes "
                           "(seed, x, features, num_shards), in that order.", **_LAYER_MESSAGES},
    diagnose=_diagnose_linear,
    on_exception=_CAST.replace("seed, num_shards and features", "seed, features and num_shards"),
    expected=lambda seed, x, features, num_shards: _layer_counts(x, features, num_shards),
    requirements={
        "Build `nnx.Linear(x.shape[-1], features, rngs=nnx.Rngs(seed))`": ("even", "uneven", "large"),
        "count the parameters in its state (`nnx.state(model, nnx.Param)`)": ("edge", "even", "uneven", "large"),
        "Return a 1-D array of shape (2,): `[total_params, per_shard]`": ("even", "uneven", "large"),
        "`per_shard = total_params / num_shards`": ("uneven",),
        # (uneven: num_shards does not divide total_params, so features != num_shards; large: 16 shards)
        "Note the argument order: features comes before num_shards here": ("uneven", "large"),
        "Numbers arrive as floats: cast them to int": ("edge", "even", "uneven", "large"),
    },
)


# --- 1.3 param_bytes -------------------------------------------------------------------------

_TARGETS_NARROW = ("bfloat16", "float16", "int8", "uint8", "float8_e4m3fn", "float8_e5m2")
_TARGETS_WIDE = ("float32", "int32", "float64")


def _tree(rng, depth, leaf_dtypes=("float32",)):
    tree = {}
    for i in range(int(rng.integers(1, 4))):
        key = f"{'abcdefgh'[i]}{int(rng.integers(0, 9))}"
        if depth > 0 and rng.random() < 0.5:
            tree[key] = _tree(rng, depth - 1, leaf_dtypes)
        else:
            shape = tuple(int(s) for s in rng.integers(1, 24, size=int(rng.integers(1, 4))))
            tree[key] = np.zeros(shape, dtype=np.dtype(str(rng.choice(leaf_dtypes))))
    return tree


def _bytes_cases(rng):
    cases = [Case("f32_leaves", (_tree(rng, 1), str(rng.choice(_TARGETS_NARROW)))) for _ in range(3)]
    cases += [Case("f32_leaves", (_tree(rng, 1), str(rng.choice(_TARGETS_WIDE)))) for _ in range(2)]
    cases += [Case("nested", ({"params": _tree(rng, 3)}, str(rng.choice(_TARGETS_NARROW)))) for _ in range(2)]
    cases += [Case("mixed_leaves", (_tree(rng, 2, ("float32", "int32", "float16", "int8")), str(t)))
              for t in rng.choice(_TARGETS_NARROW + _TARGETS_WIDE, size=2)]
    return cases


def _leaf_sizes(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaf_sizes(v)
    else:
        yield tree


def _bytes(params, dtype):
    """What the reference gets from JAX (``jax.tree.leaves``, ``jnp.dtype(dtype).itemsize``), by
    arithmetic: these trees are dicts of NumPy arrays, and the dtype a NumPy or ml_dtypes name."""
    import ml_dtypes

    itemsize = np.dtype(getattr(ml_dtypes, dtype, None) or dtype).itemsize
    return int(sum(np.size(leaf) for leaf in _leaf_sizes(params)) * itemsize)


def _diagnose_bytes(args, actual, expected):
    params, dtype = args
    leaves = list(_leaf_sizes(params))
    actual = int(actual)
    if expected and actual == 8 * expected:
        return "bits"
    own = sum(leaf.nbytes for leaf in leaves)
    if actual == own and own != expected:
        return "leaf_dtype"
    itemsize = expected // max(1, sum(leaf.size for leaf in leaves)) if expected else 0
    if itemsize and actual == len(leaves) * itemsize and actual != expected:
        return "leaf_count"
    shallow = sum(v.size for v in params.values() if not isinstance(v, dict)) * itemsize
    if itemsize and actual == shallow and actual != expected:
        return "nested"
    return None


PARAM_BYTES = Hidden(
    generate=_bytes_cases,
    fixed=(
        Case("edge", ({"w": np.zeros((), np.float32)}, "bfloat16")),
        Case("edge", ({"empty": np.zeros((0, 5), np.float32), "b": np.zeros(3, np.float32)}, "int8")),
        Case("edge", ({}, "float32")),
    ),
    messages={
        "bits": "Your result is 8 times too big: itemsize is already in bytes, do not multiply by 8.",
        "leaf_dtype": "Your result matches the leaves' current dtype, not the requested one: use "
                      "jnp.dtype(dtype).itemsize for the target dtype.",
        "leaf_count": "It looks like you counted leaves, not elements: use each leaf's size (number of elements).",
        "edge": "Wrong on an edge case: a scalar leaf has 1 element, an empty leaf 0, an empty tree 0 bytes.",
        "f32_leaves": "Wrong on a flat tree of float32 leaves: bytes = elements x target itemsize, summed.",
        "nested": "Wrong on a deeply nested tree: make sure you reach leaves at every depth (jax.tree.leaves does).",
        "mixed_leaves": "Wrong when leaves have different dtypes: the answer depends only on the target dtype.",
    },
    diagnose=_diagnose_bytes,
    on_exception="Check that dtype is a name such as 'bfloat16': jnp.dtype(dtype) turns it into a dtype.",
    expected=_bytes,
    requirements={
        "Return, as an int, the number of bytes the tree takes": ("edge", "f32_leaves", "nested", "mixed_leaves"),
        "when every leaf is stored in `dtype` (whatever dtype the leaves have now)": (
            "f32_leaves", "nested", "mixed_leaves"),
        "`params` is a pytree (nested dicts) of arrays": ("nested",),
    },
)


# --- 1.4 nnx_param_table ---------------------------------------------------------------------

def _table_cases(rng):
    def sizes(k):
        return [int(s) for s in rng.integers(1, 33, size=k)]

    return ([Case("deep", (int(rng.integers(0, 1000)), sizes(int(rng.integers(3, 6))))) for _ in range(3)]
            + [Case("two_sizes", (int(rng.integers(0, 1000)), sizes(2)))])


def _diagnose_table(args, actual, expected):
    keys = set(actual)
    if any("." in k for k in keys) and not any("/" in k for k in keys):
        return "separator"
    if any(k.endswith(("/mean", "/var")) for k in keys):
        return "batch_stats"
    if keys < set(expected) and all(k.endswith("/bias") for k in set(expected) - keys):
        return "bias"
    if keys < set(expected) and all(k.startswith("norms/") for k in set(expected) - keys):
        return "norm_params"
    if keys == set(expected):
        return "counts"
    return None


def _table(seed, layer_sizes):
    """What the reference gets from Flax (``ckptlab.models.MLP`` under ``nnx.eval_shape``), by
    arithmetic: Linear layers i (a -> b: kernel a*b, bias b), a BatchNorm (scale and bias of b)
    after each but the last; in the order of the flat state."""
    widths = list(map(int, layer_sizes))
    if len(widths) < 2:
        raise ValueError("an MLP has an input and an output width at least")  # as MLP itself raises
    table = {}
    for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        table |= {f"layers/{i}/bias": n_out, f"layers/{i}/kernel": n_in * n_out}
    for i, n_out in enumerate(widths[1:-1]):
        table |= {f"norms/{i}/bias": n_out, f"norms/{i}/scale": n_out}
    return table


NNX_TABLE = Hidden(
    generate=_table_cases,
    fixed=(Case("edge", (3, [1, 1])), Case("edge", (11, [5, 1, 5]))),
    messages={
        "separator": "Join path parts with '/', e.g. 'layers/0/kernel', not '.'.",
        "batch_stats": "BatchNorm's mean and var are batch statistics (nnx.BatchStat), not parameters: "
                       "filter the state with nnx.Param.",
        "bias": "Some bias entries are missing: every Linear layer and every BatchNorm has a bias.",
        "norm_params": "BatchNorm's scale and bias are parameters (nnx.Param) and must be in the table.",
        "counts": "The paths are right but some counts are not: the count is the number of elements (size), "
                  "not a dimension or the number of dimensions.",
        "edge": "Wrong on an edge case (layers of width 1, or a single Linear layer with no BatchNorm).",
        "deep": "Wrong on deeper models (three or more Linear layers).",
        "two_sizes": "Wrong on a model with a single Linear layer and no BatchNorm.",
    },
    diagnose=_diagnose_table,
    on_exception="Build the model exactly as ckptlab.models.MLP(layer_sizes, rngs=nnx.Rngs(seed)).",
    expected=_table,
    requirements={
        "mapping each parameter's path, joined with '/' (e.g. 'layers/0/kernel')": ("edge", "deep", "two_sizes"),
        "to its number of elements": ("edge", "deep", "two_sizes"),
        # (deep: three to five widths, so one BatchNorm or more, with its mean and var)
        "Only `nnx.Param` variables are parameters: batch statistics are state, not parameters": ("deep",),
    },
)


# Each problem's hidden cases, by its function name (the one key a problem's parts share).
HIDDEN = {
    "dense_checkpoint_accounting": DENSE,
    "orbax_save_count": NNX_LINEAR,
    "param_bytes": PARAM_BYTES,
    "nnx_param_table": NNX_TABLE,
}
