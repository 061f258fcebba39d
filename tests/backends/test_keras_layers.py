"""attnviz's TensorFlow backend against keras.layers.MultiHeadAttention."""

import numpy as np
import pytest

from attnviz import AttentionSpec, init_params, make_inputs, masks, run_attention
from attnviz.frameworks import backend
from tests.backends.cases import CASES, case_id
from tests.conftest import RTOL_F32, assert_close, gpu_params, skip_without_gpu

pytest.importorskip("tensorflow", reason="TensorFlow is not installed here")
tf_backend = backend("tensorflow")  # sets Keras on TensorFlow before keras is imported here
keras, tf = tf_backend.keras, tf_backend.tf


def _keras_mha(spec, params, x_q, x_kv):
    """keras.layers.MultiHeadAttention holding attnviz's parameters."""
    mha = keras.layers.MultiHeadAttention(
        num_heads=spec.n_heads, key_dim=spec.d_k, value_dim=spec.d_v, use_bias=spec.bias
    )
    mha(x_q, x_kv, x_kv)  # builds the sublayers
    H = spec.n_heads
    layers = {"q": mha._query_dense, "k": mha._key_dense, "v": mha._value_dense}
    for key, layer in layers.items():
        W = params[f"W_{key}"]
        layer.kernel.assign(W.reshape(W.shape[0], H, -1))  # (in, H, d): head h = columns h*d:(h+1)*d
        if spec.bias:
            layer.bias.assign(params[f"b_{key}"].reshape(H, -1))
    mha._output_dense.kernel.assign(params["W_o"].reshape(H, spec.d_v, spec.d_model))
    if spec.bias:
        mha._output_dense.bias.assign(params["b_o"])
    return mha


@pytest.mark.parametrize("device", gpu_params())
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_keras_multi_head_attention(case, device):
    skip_without_gpu("tensorflow", device)
    spec = AttentionSpec(**case)
    params, (x_q, x_kv) = init_params(spec), make_inputs(spec)
    mask = masks.from_spec(spec)
    with tf.device(tf_backend.resolve_device(device)):
        mha = _keras_mha(spec, params, x_q, x_kv)
        out, scores = mha(
            x_q,
            x_kv,
            x_kv,
            attention_mask=None if mask is None else mask.astype("int32"),  # Keras: 1 = attend
            return_attention_scores=True,
        )
    result = run_attention(spec, "tensorflow", device)
    assert_close(result.output, np.asarray(out), RTOL_F32, "output")
    assert_close(result.weights, np.asarray(scores), RTOL_F32, "weights")
