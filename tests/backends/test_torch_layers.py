"""attnviz's PyTorch backend against torch.nn.MultiheadAttention and F.scaled_dot_product_attention."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
F = torch.nn.functional

from attnviz import AttentionSpec, init_params, make_inputs, masks, run_attention
from attnviz.backends import torch_backend
from tests.backends.cases import CASES, case_id, same_width
from tests.conftest import RTOL_F32, assert_close, gpu_params, skip_without_gpu


def _torch_mha(spec, params, device):
    """torch.nn.MultiheadAttention holding attnviz's parameters."""
    cross_dims = {"kdim": spec.d_kv_in, "vdim": spec.d_kv_in} if spec.d_kv_in != spec.d_model else {}
    mha = torch.nn.MultiheadAttention(
        spec.d_model, spec.n_heads, bias=spec.bias, batch_first=True, **cross_dims
    ).to(device)
    t = lambda a: torch.from_numpy(a.T.copy())  # noqa: E731  x @ W → Linear (out, in)
    with torch.no_grad():
        if mha.in_proj_weight is not None:
            mha.in_proj_weight.copy_(torch.cat([t(params["W_q"]), t(params["W_k"]), t(params["W_v"])]))
        else:
            mha.q_proj_weight.copy_(t(params["W_q"]))
            mha.k_proj_weight.copy_(t(params["W_k"]))
            mha.v_proj_weight.copy_(t(params["W_v"]))
        mha.out_proj.weight.copy_(t(params["W_o"]))
        if spec.bias:
            mha.in_proj_bias.copy_(
                torch.from_numpy(np.concatenate([params[k] for k in ("b_q", "b_k", "b_v")]))
            )
            mha.out_proj.bias.copy_(torch.from_numpy(params["b_o"]))
    return mha.eval()


def _mha_masks(spec):
    """attnviz's True = attend mask in torch MHA's True = blocked encoding."""
    if spec.mask == "padding":  # key_padding_mask (B, Lk)
        keep = masks.padding(spec.valid_kv_len, 1, spec.len_kv)[:, 0]
        return {"key_padding_mask": torch.from_numpy(~keep)}
    mask = masks.from_spec(spec)
    if mask is None:
        return {}
    per_head = np.repeat(mask, spec.n_heads, axis=0)  # (B*H, Lq, Lk), batch-major
    return {"attn_mask": torch.from_numpy(~per_head)}


@pytest.mark.parametrize("device", gpu_params())
@pytest.mark.parametrize("case", same_width(CASES), ids=case_id)
def test_matches_torch_multihead_attention(case, device):
    skip_without_gpu("torch", device)
    spec = AttentionSpec(**{k: v for k, v in case.items()})
    params, (x_q, x_kv) = init_params(spec), make_inputs(spec)
    dev = torch_backend.resolve_device(device)
    mha = _torch_mha(spec, params, dev)
    mha_masks = {k: v.to(dev) for k, v in _mha_masks(spec).items()}
    tq, tkv = torch.from_numpy(x_q).to(dev), torch.from_numpy(x_kv).to(dev)
    with torch.no_grad():
        out, weights = mha(tq, tkv, tkv, need_weights=True, average_attn_weights=False, **mha_masks)
    result = run_attention(spec, "torch", device)
    assert_close(result.output, out.cpu().numpy(), RTOL_F32, "output")
    assert_close(result.weights, weights.cpu().numpy(), RTOL_F32, "weights")


@pytest.mark.parametrize("device", gpu_params())
@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize(("dk", "dv", "scale"), [(8, 8, None), (5, 13, None), (16, 4, 0.3)])
def test_sdpa_matches_torch_functional(dk, dv, scale, use_mask, device):
    skip_without_gpu("torch", device)
    dev = torch_backend.resolve_device(device)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, n, d, generator=g).to(dev) for n, d in ((6, dk), (9, dk), (9, dv)))
    mask = torch.rand(2, 1, 6, 9, generator=g).to(dev) < 0.7 if use_mask else None
    if mask is not None:
        mask[..., 0] = True
    context, weights = torch_backend.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    assert_close(context.cpu(), expected.cpu(), RTOL_F32, "context")
    assert torch.allclose(weights.sum(-1), torch.ones((), device=dev))
    if mask is not None:
        assert (weights[~mask.expand_as(weights)] == 0).all()


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_to_numpy_from_the_gpu_holds_the_tensors_values(layout):
    """A GPU tensor comes back through pinned host memory with its shape, dtype and values (strides
    of a transposed view included), as the tensor's own `.cpu()` gives them."""
    skip_without_gpu("torch", "gpu")
    g = torch.Generator().manual_seed(5)
    cpu = torch.randn(3, 4, 33, 17, generator=g)
    gpu = cpu.to("cuda")
    if layout == "transposed":
        cpu, gpu = cpu.transpose(-1, -2), gpu.transpose(-1, -2)
    got = torch_backend.to_numpy(gpu)
    assert got.shape == tuple(cpu.shape) and got.dtype == np.float32
    np.testing.assert_array_equal(got, cpu.numpy())


def test_captured_steps_are_the_values_computed_even_when_a_hook_edits_the_weights_in_place():
    """The (B, H, L, L) steps are kept without a copy (`owned`): nothing writes to them again. The
    weights are copied whenever a hook other than the layer's own could edit them in place; here a
    hook zeroes them in place, and the recorded softmax still holds what the softmax gave."""
    from attnviz.result import Recorder

    spec = AttentionSpec(d_model=16, n_heads=2, len_q=5, mask="causal")
    params, (x, _) = init_params(spec), make_inputs(spec)

    class Zeroing(torch_backend.MultiHeadAttention):
        def after_weights(self, weights):
            return weights.mul_(0.0)  # in place: the tensor the record received

    tx, mask = torch.from_numpy(x), torch.from_numpy(masks.causal(5))
    steps = {}
    for cls in (torch_backend.MultiHeadAttention, Zeroing):
        layer = cls.from_spec(spec).load_params(params)
        record = Recorder(True, torch_backend.to_numpy)
        with torch.inference_mode():
            layer(tx, tx, mask, record=record)
        steps[cls] = {s.name: s.value for s in record.steps}
    plain, zeroed = steps[torch_backend.MultiHeadAttention], steps[Zeroing]
    reference = np.exp(plain["masked"] - plain["masked"].max(-1, keepdims=True))
    reference /= reference.sum(-1, keepdims=True)
    np.testing.assert_allclose(plain["softmax"], reference, rtol=1e-6)
    np.testing.assert_allclose(zeroed["softmax"], reference, rtol=1e-6)  # recorded before the hook
    assert not zeroed["context"].any()  # and the hook's zeros did reach V
