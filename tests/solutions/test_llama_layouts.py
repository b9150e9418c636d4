"""Lesson 9's model beside the layouts and precisions it is checked in (``ckptlab.llama``, ``ckptlab.hf``,
``ckptlab.hfcheck``, ``ckptlab.hfconvert``), each fact with a control that could have shown it false:

- Meta's original rotary order: ``hfconvert.permute_for_rotate_half`` is Hugging Face's ``permute`` of
  ``convert_llama_weights_to_hf.py`` (row j of a head from Meta's row 2j, row head_dim / 2 + j from
  2j + 1), ``hfconvert.permute_for_pairs`` its inverse; Meta's rows with Meta's rotary (``rope="pairs"``) give
  the model's logits, the same rows read with ``rotate_half`` do not.
- The reference's precision: ``llama.logits`` at ``"default"`` and ``"highest"`` are the same numbers on
  CPU devices, and its inputs rounded as TF32 or a bfloat16 pass round them move the logits over
  float32's tolerance (what JAX's default does on GPUs and TPUs)."""

from __future__ import annotations

import numpy as np
import pytest

from ckptlab import hf, hfcheck, hfconvert, llama

CONFIG = llama.LlamaConfig()
TOKENS = np.array([3, 14, 15, 92, 65, 35, 89, 79, 32, 38])


@pytest.fixture(scope="module")
def model():
    params = llama.random_params(CONFIG, seed=5)
    return params, hf.to_hf(params, CONFIG)


def test_the_permutation_is_hugging_faces_and_its_inverse_metas():
    heads, head_dim, inner = 3, 8, 5
    meta = np.random.default_rng(0).standard_normal((heads * head_dim, inner))
    ours = hfconvert.permute_for_rotate_half(meta, heads)
    for h in range(heads):
        for j in range(head_dim // 2):
            assert np.array_equal(ours[h * head_dim + j], meta[h * head_dim + 2 * j])
            assert np.array_equal(ours[h * head_dim + head_dim // 2 + j], meta[h * head_dim + 2 * j + 1])
    assert np.array_equal(hfconvert.permute_for_pairs(ours, heads), meta)
    assert not np.array_equal(ours, meta)  # the control: it moves rows


def test_metas_rows_with_metas_rotary_are_the_same_model_and_read_as_hugging_faces_are_not(model):
    params, right = model
    heads = {"self_attn.q_proj": CONFIG.num_attention_heads, "self_attn.k_proj": CONFIG.num_key_value_heads}

    def rows(name):
        return next((n for part, n in heads.items() if name.endswith(f".{part}.weight")), None)

    meta = {hfconvert.meta_name(name): hfconvert.permute_for_pairs(t, rows(name)) if rows(name) else t for name, t in right.items()}
    assert len(meta) == len(right) and "layers.1.attention.wk.weight" in meta and "output.weight" not in meta
    want = hfcheck.hf_logits(right.__getitem__, CONFIG, TOKENS)
    as_meta = hfcheck.hf_logits(lambda name: meta[hfconvert.meta_name(name)], CONFIG, TOKENS, rope="pairs")
    forgotten = hfcheck.hf_logits(lambda name: meta[hfconvert.meta_name(name)], CONFIG, TOKENS)
    assert hfcheck.logits_gap(want, as_meta) < 1e-12
    assert hfcheck.logits_gap(want, forgotten) > 0.05


def test_the_reference_is_float32_at_either_precision_on_cpu_and_rounded_inputs_move_it(model):
    params, right = model
    files = hfcheck.hf_logits(right.__getitem__, CONFIG, TOKENS)
    highest = llama.logits(CONFIG, params, TOKENS)
    assert np.array_equal(highest, llama.logits(CONFIG, params, TOKENS, precision="default"))
    assert hfcheck.logits_gap(highest, files) < 1e-6
    for how in ("tensorfloat32", "bfloat16"):
        gap = hfcheck.logits_gap(llama.logits(CONFIG, params, TOKENS, round_inputs=how), files)
        assert hfcheck.logits_tolerance("float32") < gap < hfcheck.logits_tolerance("bfloat16"), (how, gap)
