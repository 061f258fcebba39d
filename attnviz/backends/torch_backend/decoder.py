"""One transformer stack in PyTorch for every decoder family, its parts read from the family's row.

A family is a `DecoderLayout` (`attnviz.backends.common`): which norm and where it sits, which MLP,
learned positions or RoPE, each layer's attention. GPT-2 (Radford et al., 2019, as transformers'
`modeling_gpt2.py`: learned positions, pre-LayerNorm, GELU Conv1D MLP), Llama (Touvron et al.,
2023, as `modeling_llama.py`: RoPE, grouped K/V heads, pre-RMSNorm, SwiGLU) and the Training lab's
model (post-LayerNorm, ReLU MLP, causal or not) and Gemma 3 (as `modeling_gemma3.py`: scaled
embeddings, RMSNorm before and after each sublayer, QK-norm, local and global layers) are four
layouts of this one block loop. Every layer's attention is attnviz's
`MultiHeadAttention`. `step` runs new positions over a `KVCache` (generation).
Shapes: T tokens, n new tokens, D hidden size, H heads, Dh head width, L layers, V vocabulary.
Mirrors `tf_backend.decoder` name for name; the call follows `attnviz.backends.common`.
"""

from __future__ import annotations

import numpy as np
import torch

from attnviz.backends.common import (
    DecoderLayout,
    Forward,
    KVCache,
    Layer,
    LayerKV,
    Linear,
    Mlp,
    Norm,
    Replacement,
    RowEdit,
    Sublayer,
    Trace,
)
from attnviz.backends.torch_backend.attention import MultiHeadAttention, rms_norm
from attnviz.backends.torch_backend.blocks import ACTIVATIONS, attend, causal_mask, layer_norm, replaced
from attnviz.backends.torch_backend.device import recorded_code, to_numpy
from attnviz.result import Recorder


class Decoder:
    """Embeddings, then per layer `x ← outside(x + after(attn(before(x))))` and the same around the
    MLP (`common.Sublayer`), a final norm and the unembedding."""

    def __init__(self, checkpoint):
        self.layout: DecoderLayout = checkpoint.family.layout(checkpoint.config)
        self.w = {k: torch.from_numpy(v) for k, v in checkpoint.weights.items()}
        self.attention = [
            MultiHeadAttention(
                self.layout.d_model,
                h.n_heads,
                h.d_k,
                h.d_v,
                n_kv_heads=h.n_kv_heads,
                rope_base=h.rope_base,
                window=h.window,
                bias=h.bias,
                scale=h.scale,
                qk_norm_eps=h.qk_norm_eps,
            )
            .load_params(checkpoint.layer_params(i))
            .eval()
            for i, h in enumerate(layer.heads for layer in self.layout.layers)
        ]

    def _norm(self, x: torch.Tensor, norm: Norm | None) -> torch.Tensor:
        if norm is None:
            return x
        gamma = self.w[norm.weight] + norm.offset if norm.offset else self.w[norm.weight]  # Gemma: 1 + w
        if norm.kind == "rms":
            return rms_norm(x, gamma, norm.eps)
        return layer_norm(x, gamma, self.w[norm.bias], norm.eps)

    def _linear(self, x: torch.Tensor, linear: Linear) -> torch.Tensor:
        W = self.w[linear.weight]
        y = x @ W.T if linear.transposed else x @ W  # W (out, in) or (in, out)
        return y if linear.bias is None else y + self.w[linear.bias]

    def _mlp(self, x: torch.Tensor, mlp: Mlp) -> torch.Tensor:
        """`(…, D) → (…, I) → (…, D)`: `down(act(up(x)))`, or gated `down(act(gate(x)) · up(x))`."""
        act = ACTIVATIONS[mlp.act]
        if mlp.gate is None:
            return self._linear(act(self._linear(x, mlp.up)), mlp.down)
        return self._linear(act(self._linear(x, mlp.gate)) * self._linear(x, mlp.up), mlp.down)

    def _residual(self, x: torch.Tensor, out: torch.Tensor, norms: Sublayer) -> torch.Tensor:
        """`outside(x + after(out))`: the sublayer's output joins the residual stream."""
        return self._norm(x + self._norm(out, norms.after), norms.outside)

    def _embed(self, input_ids: list[int], start: int = 0) -> torch.Tensor:
        """`(1, T, D)`: token embeddings (times the family's `embed_scale`), plus learned positions
        `start …` if the family has them."""
        x = self.w[self.layout.embed][torch.tensor(input_ids)]  # (T, D)
        if self.layout.embed_scale != 1.0:
            x = x * self.layout.embed_scale
        if self.layout.position is not None:
            x = x + self.w[self.layout.position][start : start + len(input_ids)]
        return x[None]

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        """`(…, D) → (…, V)`: the final norm (if any), then the unembedding."""
        return self._linear(self._norm(x, self.layout.final_norm), self.layout.unembed)

    def _token_logits(self, x: torch.Tensor, tokens: list[int]) -> torch.Tensor:
        """`x (B, D)` → `(B, k)`: the final norm (if any), then the unembedding's rows of the k
        `tokens` only."""
        unembed, ids = self.layout.unembed, torch.tensor(tokens)
        W = self.w[unembed.weight]
        W = W[ids] if unembed.transposed else W[:, ids].T  # (k, D)
        y = self._norm(x, self.layout.final_norm) @ W.T
        return y if unembed.bias is None else y + self.w[unembed.bias][ids]

    @torch.inference_mode()
    def lens(self, hidden: np.ndarray) -> np.ndarray:
        """`hidden (N, T, D)` → `logits (N, T, V)`: the final norm (if any), then the unembedding."""
        return self._logits(torch.from_numpy(hidden)).numpy()

    @torch.inference_mode()
    def __call__(
        self,
        input_ids: list[int],
        token_type_ids: list[int] | None = None,
        *,
        replace: dict[int, dict[int, Replacement]] | None = None,
        capture_layer: int | None = None,
        head_outputs: bool = False,
        edit: dict[int, RowEdit] | None = None,
        window: int | None = None,
    ) -> Forward:
        """One forward pass over `input_ids`; `last_hidden_state` is after the final norm (the last
        block's output where there is none), `logits (T, V)`. `edit`: attention rows put in place
        before they multiply V; `window`: the local layers' window narrowed to that many tokens."""
        x = self._embed(input_ids)  # (1, T, D)
        masks = self._masks(len(input_ids), window)  # L × (1, T, T) or None
        keep, trace = Recorder(True, to_numpy, recorded_code()), Trace(head_outputs)
        for i in range(len(self.layout.layers)):
            record = keep if i == capture_layer else None
            h = x
            x, weights, context = self._block(
                x, i, masks[i], replace=(replace or {}).get(i), keep=record, edit=(edit or {}).get(i)
            )
            trace.block(h, weights, context)  # (1, T, D), (1, H, T, T), (1, H, T, Dh)
        final = None if self.layout.final_norm is None else self._norm(x, self.layout.final_norm)[0]  # (T, D)
        logits = self._linear(x[0] if final is None else final, self.layout.unembed)  # (T, V)
        return trace.finish(x, logits, keep.steps, final)

    def _masks(self, T: int, window: int | None) -> list:
        """Each layer's mask beyond its own causality and window, `(1, T, T)` or None: a local layer
        narrowed to `window` keys when one is given."""
        layers = self.layout.layers
        narrow = None if window is None else causal_mask(T, window)
        return [None if layer.heads.window is None else narrow for layer in layers]

    def _block(
        self,
        x: torch.Tensor,
        i: int,
        mask: torch.Tensor | None = None,
        *,
        past: LayerKV | None = None,
        start: int = 0,
        replace: dict[int, Replacement] | None = None,
        keep: Recorder | None = None,
        edit: RowEdit | None = None,
        tap: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Block `i` over `x (B, n, D)` at positions `start …`: the one step that the full pass, the
        cached step, the patching sweep's prefix and its resumption all loop over.

        Args:
            past: the layer's cached keys and values, read and extended (None: nothing cached).
            replace, keep, edit: heads replaced, the captured layer's recorder, rows edited (`attend`).
            tap: added to the attention's output before it joins the residual stream (a gradient's
                handle); None: nothing.

        Returns:
            The block's output `(B, n, D)`, the attention weights `(B, H, n, Lk)` and the heads'
            outputs `(B, H, n, Dh)`.
        """
        x, weights, context = self._attention_sublayer(x, i, mask, past, start, replace, keep, edit, tap)
        return self._mlp_block(x, self.layout.layers[i]), weights, context

    def _attention_sublayer(
        self, x, i, mask=None, past=None, start=0, replace=None, keep=None, edit=None, tap=None
    ):
        """`x (B, n, D)` after block `i`'s attention sublayer (its norms and the residual), with the
        weights and heads' outputs `_block` returns."""
        layer = self.layout.layers[i]
        h = self._norm(x, layer.attention.before)
        a, weights, context = attend(
            self.attention[i],
            h,
            mask,
            replace or {},
            keep,
            edit,
            past=past,
            start=start,
            causal=self.layout.causal,
        )
        return self._residual(x, a if tap is None else a + tap, layer.attention), weights, context

    def new_cache(self, weights: bool = False) -> KVCache:
        """An empty cache for one generation (`step`); with `weights`, each step leaves its attention
        weights in it (`KVCache.weights`)."""
        return KVCache([layer.heads.window for layer in self.layout.layers], weights)

    @torch.inference_mode()
    def step(self, input_ids: list[int], cache: KVCache) -> np.ndarray:
        """Run the new tokens `input_ids` (positions `cache.length …`) through the layers, reading
        and extending `cache`: `logits (1, V)` of the last new position, the next token's (the others
        are never read: with Gemma's 262,144-token vocabulary a prompt's rows would cost more than its
        layers). Nothing is recorded (see `__call__` for that)."""
        start = cache.begin(len(input_ids))
        x = self._embed(input_ids, start)  # (1, n, D)
        for i in range(len(self.layout.layers)):
            x, weights, _ = self._block(x, i, past=cache.layers[i], start=start)  # (1, n, D)
            if cache.keep_weights:
                cache.weights[i] = weights  # (1, H, n, Lk)
        cache.advance()
        return self._logits(x[0, -1:]).numpy()  # (1, V)

    def _mlp_block(self, x: torch.Tensor, layer: Layer) -> torch.Tensor:
        """`x (B, T, D)` after the block's MLP sublayer (unchanged where the layer has none)."""
        if layer.mlp is None:
            return x
        return self._residual(x, self._mlp(self._norm(x, layer.mlp_norms.before), layer.mlp), layer.mlp_norms)

    @torch.inference_mode()
    def prefix_cache(self, hidden: np.ndarray, length: int) -> KVCache | None:
        """The keys and values of positions `0 … length − 1` at every layer, read from a run's
        residual stream `hidden (L + 1, T, D)` (`Forward.hidden_states`) through each block's
        attention sublayer (its MLP is not needed: the next layer's input is read too); None for
        `length` 0."""
        if length == 0:
            return None
        cache = self.new_cache()
        cache.begin(length)
        for i in range(len(self.layout.layers)):
            x = torch.from_numpy(hidden[i, :length])[None]  # (1, p, D)
            self._attention_sublayer(x, i, past=cache.layers[i])  # fills the layer's cache
        cache.advance()
        return cache

    @torch.inference_mode()
    def resume(
        self,
        x: np.ndarray,
        layer: int,
        context: np.ndarray,
        replace: list[dict[int, Replacement]],
        tokens: list[int],
        cache: KVCache | None = None,
    ) -> np.ndarray:
        """The last position's logits of `tokens`, `(B, len(tokens))`, of B runs that share
        everything before block `layer` and differ only in that block's replaced heads, one
        `replace` dict each: a patching sweep's runs for one layer, as one batch that starts at
        `layer`, keeps no attention weights and, over a `cache`, computes only the positions after
        the prefix the runs share.

        Args:
            x: `(n, D)`, the shared residual stream entering block `layer` at positions
                `start …` (`start` = `cache.length`, 0 without a cache).
            context: `(H, n, Dh)`, that block's heads' outputs at those positions.
            replace: `{head: replacement}` per run, each replacement `(n, Dh)` or an ablation.
            tokens: the vocabulary entries whose logits are read (a sweep's answer and wrong
                token: the whole unembedding would cost a quarter of a SmolLM2 sweep).
            cache: every layer's keys and values of positions `0 … start − 1` (`prefix_cache`):
                causal attention leaves them the same in every run.
        """
        start = 0 if cache is None else cache.length
        x, context = torch.from_numpy(x)[None], torch.from_numpy(context)[None]  # (1, n, D), (1, H, n, Dh)
        block, attention = self.layout.layers[layer], self.attention[layer]
        a = attention.output_proj(context.transpose(1, 2).flatten(2))  # (1, n, D): heads side by side
        a = torch.cat([replaced(attention, a, context, r)[0] for r in replace])  # (B, n, D)
        x = self._mlp_block(self._residual(x, a, block.attention), block)  # (B, n, D)
        for i in range(layer + 1, len(self.layout.layers)):
            past = None if cache is None else cache.layers[i].copy()  # (1, Hkv, start, ·): left as it is
            x = self._block(x, i, past=past, start=start)[0]  # (B, n, D)
        return self._token_logits(x[:, -1], tokens).numpy()  # (B, len(tokens))

    def attention_gradients(
        self, input_ids: list[int], direction: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """One forward and one backward pass for `metric = logits[-1] · direction (V,)`.

        Returns:
            `∂metric/∂a (L, T, D)` for each block's attention output `a` (before it joins the
            residual stream), the heads' outputs `(L, H, T, Dh)` and `metric`.
        """
        with torch.enable_grad():
            x = self._embed(input_ids)  # (1, T, D)
            taps, heads = [], []
            for i in range(len(self.layout.layers)):
                taps.append(torch.zeros_like(x, requires_grad=True))  # ∂metric/∂tap = ∂metric/∂a
                x, _, context = self._block(x, i, tap=taps[-1])  # (1, T, D)
                heads.append(context[0].detach())  # (H, T, Dh)
            metric = self._logits(x[0, -1]) @ torch.from_numpy(direction)
            grads = torch.autograd.grad(metric, taps)  # L × (1, T, D)
        return torch.cat(grads).numpy(), torch.stack(heads).numpy(), metric.item()
