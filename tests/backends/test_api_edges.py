"""Issue 11 §3: API edges — x_kv given as x_q in self mode, 2-D and 3-D masks, gradients.

Each of these failed on the first version: self mode refused `(x, x)`, a 2-D mask was spread over the
heads instead of the batch, and the PyTorch backend could not be differentiated.
"""

import numpy as np
import pytest

from attnviz import AttentionSpec, init_params, make_inputs, masks, reference, run_attention
from attnviz.errors import SpecError
from attnviz.frameworks import backend
from tests.conftest import RTOL_F32, RTOL_F64, assert_close, requires


def test_self_mode_accepts_x_kv_that_is_x_q(framework):
    spec = AttentionSpec(len_q=5, d_model=8, n_heads=2, mask="causal")
    x_q, x_kv = make_inputs(spec)
    assert x_kv is x_q
    given = run_attention(spec, framework, x_q=x_q, x_kv=x_kv)
    copy = run_attention(spec, framework, x_q=x_q, x_kv=x_q.copy())  # equal, not identical
    alone = run_attention(spec, framework, x_q=x_q)
    np.testing.assert_array_equal(given.output, alone.output)
    np.testing.assert_array_equal(copy.output, alone.output)


def test_self_mode_refuses_a_different_x_kv_and_suggests_cross(framework):
    spec = AttentionSpec(len_q=5, d_model=8, n_heads=2)
    x_q, _ = make_inputs(spec)
    with pytest.raises(SpecError, match="mode='cross'") as info:
        run_attention(spec, framework, x_q=x_q, x_kv=x_q + 1)
    assert info.value.field == "x_kv"


def _layer(framework, spec, params):
    be = backend(framework)
    return be.build_layer(spec, be.resolve_device("cpu")).load_params(params)


def _call(framework, layer, x, mask):
    be = backend(framework)
    with be.inference():
        out, weights = layer(
            be.to_tensor(x, "cpu" if framework == "tensorflow" else be.resolve_device("cpu")),
            be.to_tensor(x, "cpu" if framework == "tensorflow" else be.resolve_device("cpu")),
            None if mask is None else be.to_tensor(mask, be.resolve_device("cpu")),
        )
    return be.to_numpy(out), be.to_numpy(weights)  # fmt: skip


@pytest.mark.parametrize(("heads", "length"), [(2, 5), (5, 5), (4, 4)])
def test_layer_takes_a_2d_mask_for_every_batch_item(framework, heads, length):
    """A `(Lq, Lk)` mask applies to every batch item and head (heads == Lq was silently wrong)."""
    spec = AttentionSpec(batch=3, len_q=length, d_model=4 * heads, n_heads=heads, dtype="float64")
    params = init_params(spec)
    x, _ = make_inputs(spec)
    mask2d = masks.causal(length)
    out, weights = _call(framework, _layer(framework, spec, params), x, mask2d)
    ref = reference.multi_head_attention(spec.replace(mask="custom", custom_mask=mask2d), params, x, x)
    assert_close(weights, ref["softmax"], RTOL_F64, "weights")
    assert_close(out, ref["output_proj"], RTOL_F64, "output")
    out3, _ = _call(
        framework, _layer(framework, spec, params), x, np.broadcast_to(mask2d, (3, length, length))
    )
    assert_close(out3, out, RTOL_F64, "3-D mask")


@pytest.mark.parametrize("shape", [(1, 1, 5, 5), (5,), (2, 5, 5), (5, 4)])
def test_layer_rejects_other_mask_shapes_naming_them(framework, shape):
    spec = AttentionSpec(batch=3, len_q=5, d_model=8, n_heads=2)
    x, _ = make_inputs(spec)
    with pytest.raises(SpecError, match=r"shape \(" + ", ".join(map(str, shape))) as info:
        _call(framework, _layer(framework, spec, init_params(spec)), x, np.ones(shape, bool))
    assert info.value.field == "mask"


# -- gradients --------------------------------------------------------------------------------

CASES = [
    {"mask": "none"},
    {"mask": "causal"},
    {
        "mask": "custom",
        "custom_mask": np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 1]], bool),
    },
]


def _torch_grads(spec, params, x, ours: bool):
    torch = backend("torch").torch
    F = torch.nn.functional
    dtype = getattr(torch, spec.dtype)
    p = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in params.items()}
    tx = torch.tensor(x, dtype=dtype, requires_grad=True)
    mask = masks.from_spec(spec)
    tm = None if mask is None else torch.from_numpy(mask)
    B, L, H, Dk = spec.batch, spec.len_q, spec.n_heads, spec.d_k
    split = lambda t: t.view(B, L, H, Dk).transpose(1, 2)  # noqa: E731
    q, k, v = (split(tx @ p[f"W_{n}"] + p[f"b_{n}"]) for n in "qkv")
    if ours:
        tb = backend("torch")
        ctx, _ = tb.scaled_dot_product_attention(q, k, v, None if tm is None else tm[:, None])
    else:  # PyTorch's own kernel; it gives NaN for a row with no allowed key, so zero those rows after
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=None if tm is None else tm[:, None])
        if tm is not None:
            ctx = torch.where(tm.any(-1)[:, None, :, None], ctx, 0.0)
    out = ctx.transpose(1, 2).reshape(B, L, H * Dk) @ p["W_o"] + p["b_o"]
    (out * torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)).sum().backward()
    return {"x": tx.grad.numpy(), **{k: t.grad.numpy() for k, t in p.items()}}


@requires("torch")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["mask"])
def test_torch_gradients_equal_sdpa_gradients(case, dtype):
    spec = AttentionSpec(batch=2, len_q=4, d_model=8, n_heads=2, dtype=dtype, seed=3, **case)
    params, (x, _) = init_params(spec), make_inputs(spec)
    ours, theirs = _torch_grads(spec, params, x, True), _torch_grads(spec, params, x, False)
    tol = RTOL_F32 if dtype == "float32" else RTOL_F64
    scale = max(np.abs(g).max() for g in theirs.values())  # d/db_k is 0 in exact arithmetic: no own scale
    for name in ours:
        assert np.isfinite(ours[name]).all(), name
        err = np.abs(ours[name].astype(np.float64) - theirs[name]).max() / scale
        assert err <= tol, f"d/d{name}: error {err:.2e} of the largest gradient > {tol:.0e}"


@requires("torch")
def test_torch_fully_masked_rows_give_zero_not_nan_gradients():
    torch = backend("torch").torch
    tb = backend("torch")
    q, k, v = (torch.randn(1, 1, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    ctx, weights = tb.scaled_dot_product_attention(q, k, v, mask)
    ctx.sum().backward()
    assert torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all() and torch.isfinite(v.grad).all()
    assert (q.grad[0, 0, 1] == 0).all()  # the empty row's query gets no gradient
    assert (weights[0, 0, 1] == 0).all() and (ctx[0, 0, 1] == 0).all()


@requires("torch")
def test_module_gradients_flow_through_multi_head_attention():
    torch = backend("torch").torch
    spec = AttentionSpec(len_q=5, d_model=8, n_heads=2, mask="causal", residual_norm=True)
    layer = _layer("torch", spec, init_params(spec))
    x = torch.from_numpy(make_inputs(spec)[0])
    out, _ = layer(x, x, torch.from_numpy(masks.causal(5)))
    out.square().sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def _keras_grads(spec, params, x, ours: bool):
    tb = backend("tensorflow")
    tf, keras = tb.tf, tb.keras
    mask = masks.from_spec(spec)
    tx = tf.Variable(x)
    if ours:
        layer = _layer("tensorflow", spec, params)
    else:
        layer = keras.layers.MultiHeadAttention(spec.n_heads, spec.d_k, dtype=spec.dtype)
        layer(x, x)
        H, Dk, D = spec.n_heads, spec.d_k, spec.d_model
        layer.set_weights(
            [w for n in "qkv" for w in (params[f"W_{n}"].reshape(D, H, Dk), params[f"b_{n}"].reshape(H, Dk))]
            + [params["W_o"].reshape(H, Dk, D), params["b_o"]]
        )
    weights_in = [tx, *layer.trainable_variables]
    with tf.GradientTape() as tape:
        out = layer(tx, tx, attention_mask=None if mask is None else tf.constant(mask))
        out = out[0] if ours else out
        loss = tf.reduce_sum(
            out * tf.reshape(tf.linspace(tf.constant(-1, out.dtype), 1, tf.size(out)), out.shape)
        )
    grads = tape.gradient(loss, weights_in)
    names = ["x"] + [v.path.split("/")[-2] + "/" + v.name for v in layer.trainable_variables]
    return {n: np.asarray(g).reshape(-1) for n, g in zip(names, grads, strict=True)}, out.numpy()


@requires("tensorflow")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES[:2], ids=lambda c: c["mask"])
def test_tensorflow_gradients_equal_keras_layer_gradients(case, dtype):
    spec = AttentionSpec(batch=2, len_q=4, d_model=8, n_heads=2, dtype=dtype, seed=5, **case)
    params, (x, _) = init_params(spec), make_inputs(spec)
    ours, out_ours = _keras_grads(spec, params, x, True)
    theirs, out_theirs = _keras_grads(spec, params, x, False)
    tol = RTOL_F32 if dtype == "float32" else RTOL_F64
    assert_close(out_ours, out_theirs, tol, "output")
    assert_close(ours["x"], theirs["x"], tol, "d/dx")
    flat = lambda g: np.sort(np.concatenate([v for k, v in g.items() if k != "x"]))  # noqa: E731
    assert_close(flat(ours), flat(theirs), tol, "d/dweights (all parameters, sorted)")


@requires("tensorflow")
def test_tensorflow_fully_masked_rows_give_zero_not_nan_gradients():
    tb = backend("tensorflow")
    tf = tb.tf
    q, k, v = (tf.Variable(np.random.default_rng(i).standard_normal((1, 1, 3, 4))) for i in range(3))
    mask = tf.constant([[True, False, False], [False, False, False], [True, True, True]])
    with tf.GradientTape() as tape:
        ctx, weights = tb.scaled_dot_product_attention(q, k, v, mask)
        loss = tf.reduce_sum(ctx)
    grads = tape.gradient(loss, [q, k, v])
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    assert (grads[0].numpy()[0, 0, 1] == 0).all()
    assert (weights.numpy()[0, 0, 1] == 0).all()


# -- issue 20 §2: timing counts and framework tensors as input ---------------------------------


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"repeats": 0}, "repeats"), ({"repeats": -3}, "repeats"), ({"repeats": 2.5}, "repeats"),
    ({"repeats": True}, "repeats"), ({"warmup": -1}, "warmup"), ({"warmup": 1.5}, "warmup"),
])  # fmt: skip
def test_time_attention_refuses_bad_counts_naming_them(kwargs, field):
    from attnviz.run import time_attention

    with pytest.raises(SpecError) as info:
        time_attention(AttentionSpec(len_q=4, d_model=8, n_heads=2), "torch", **kwargs)
    assert info.value.field == field and "allowed:" in str(info.value)


@requires("torch")
def test_time_attention_accepts_no_warmup():
    from attnviz.run import time_attention

    timing = time_attention(AttentionSpec(len_q=4, d_model=8, n_heads=2), "torch", warmup=0, repeats=1)
    assert timing.repeats == 1 and timing.median_s > 0


@requires("torch")
@pytest.mark.parametrize("argument", ["x_q", "params"])
def test_a_tensor_that_requires_grad_is_refused_naming_the_argument(argument):
    """Decided: refused (not silently detached) — a run records no gradients, so the caller says so."""
    import torch

    spec = AttentionSpec(len_q=4, d_model=8, n_heads=2)
    x_q, params = make_inputs(spec)[0], init_params(spec)
    if argument == "x_q":
        kwargs = {"x_q": torch.from_numpy(x_q).requires_grad_()}
        field = "x_q"
    else:
        kwargs = {"params": {**params, "W_q": torch.from_numpy(params["W_q"]).requires_grad_()}}
        field = "params['W_q']"
    with pytest.raises(SpecError) as info:
        run_attention(spec, "torch", **kwargs)
    assert info.value.field == field and "requires grad" in str(info.value) and "detach()" in str(info.value)
    detached = {k: (v.detach().numpy() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    if argument == "params":
        detached = {
            "params": {
                k: (v.detach().numpy() if isinstance(v, torch.Tensor) else v)
                for k, v in kwargs["params"].items()
            }
        }
    np.testing.assert_array_equal(
        run_attention(spec, "torch", **detached).output, run_attention(spec, "torch").output
    )


@requires("torch")
def test_torch_fast_path_hands_on_the_context_to_a_tap():
    """A model's tap (enabled only when a layer is captured) gets the per-head context from the in-place
    fast path too, equal to the textbook path's (ablation and patching read it)."""
    import torch

    from attnviz.backends.common import Tap
    from attnviz.result import Recorder

    spec = AttentionSpec(len_q=6, d_model=16, n_heads=4, n_kv_heads=2, rope_base=1e4, mask="causal")
    layer = _layer("torch", spec, init_params(spec)).eval()
    x = torch.from_numpy(make_inputs(spec)[0])
    mask = torch.from_numpy(masks.causal(6))
    fast, slow = Tap(), Tap(Recorder(True, lambda t: t.detach().numpy()))
    assert not fast.enabled and slow.enabled
    with torch.inference_mode():
        out_fast, _ = layer(x, x, mask, record=fast)
        out_slow, _ = layer(x, x, mask, record=slow)
    assert [s.name for s in slow.keep.steps][-3:] == ["context", "merged", "output_proj"]
    assert_close(fast.context.numpy(), slow.context.numpy(), RTOL_F32, "context")
    assert_close(out_fast.numpy(), out_slow.numpy(), RTOL_F32, "output")
