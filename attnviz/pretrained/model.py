"""A loaded checkpoint and what it can do: run, ablate and patch heads, read the residual stream
(logit lens), rank heads by importance, predict and generate.

Every layer's attention is attnviz's own `MultiHeadAttention`; the model class
comes from the checkpoint's family (`families.FAMILIES`) and follows the call
in `attnviz.backends.common`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.backends.common import ABLATIONS, Forward
from attnviz.errors import SpecError
from attnviz.exec.monitor import Monitor, watch
from attnviz.frameworks import backend, check_device, check_framework
from attnviz.pretrained.checks import check_ablate, check_ids, check_layer, check_patch, check_text, merge
from attnviz.pretrained.edits import check_changes, describe, row_edits
from attnviz.pretrained.families import Family
from attnviz.pretrained.files import WEIGHTS, CheckpointError
from attnviz.pretrained.sampling import (
    MAX_NEW_TOKENS,
    Generation,
    check_k,
    cosine_similarity,
    decode,
    is_index,
    kl_divergence,
    next_token_probabilities,
    sampler,
    softmax_rows,
)

SPECIAL_TOKENS = ("[CLS]", "[SEP]")
END_TOKENS = ("<|endoftext|>", "<|im_end|>", "<eos>", "<end_of_turn>", "</s>")  # end a text or a turn


@dataclass(frozen=True)
class ModelOutput:
    """What `Checkpoint.run` returns.

    Attributes:
        tokens: as the model's tokenizer gives them, special tokens included.
        attentions: `(layers, heads, T, T)` attention probabilities.
        last_hidden_state: `(T, hidden)`.
        framework: "torch" or "tensorflow".
        ids: the token ids `(T,)`.
        logits: `(T, vocab)` next-token logits (decoders), else None.
        steps: the `Step`s of layer `capture_layer` (empty when not asked for).
        capture_layer: the layer whose steps were recorded, or None.
        ablate: the heads ablated, `{(layer, head): "zero" | "mean"}`.
        hidden_states: `(layers + 1, T, hidden)`: the residual stream entering each block, then
            the last block's output (before a final norm).
        head_outputs: `(layers, heads, T, head_dim)`, each head's attention-weighted values (the
            input of the output projection), when `run(..., head_outputs=True)`; else None.
        patch: the heads patched, `{(layer, head): z (T, head_dim)}`.
        edit: the attention rows edited, `{(layer, head): {query: row (T,)}}`; `attentions`
            holds them where the softmax's rows were.
        window: the local layers' window for this run, or None (the model's own).
        device: "cpu" or "gpu", where the run computed (the lens of it computes there too).
    """

    tokens: list[str]
    attentions: np.ndarray
    last_hidden_state: np.ndarray
    framework: str
    ids: list[int] = field(default_factory=list)
    logits: np.ndarray | None = None
    steps: list = field(default_factory=list)
    capture_layer: int | None = None
    ablate: dict = field(default_factory=dict)
    hidden_states: np.ndarray | None = None
    head_outputs: np.ndarray | None = None
    patch: dict = field(default_factory=dict)
    edit: dict = field(default_factory=dict)
    window: int | None = None
    device: str = "cpu"

    @property
    def changes(self) -> list[str]:
        """How this run's model differs from the checkpoint, one phrase per change (empty: none)."""
        return describe(self.ablate, self.patch, self.edit, self.window)


EncoderOutput = ModelOutput  # the name before decoders existed


class Checkpoint:
    """A checkpoint's configuration, weights (float32, validated), tokenizer and family.

    Opened as a card (`pretrained.load(..., weights=False)`), it holds the light part alone — the
    configuration, the tokenizer, the family's layout, where it came from — which is what the app's
    server and its pages read; its `weights` are loaded only where the math runs (a worker, or a
    library user's process), and a card asked for them says so instead of loading them.
    """

    def __init__(
        self,
        name: str,
        path: Path,
        config: Any,
        weights: dict[str, np.ndarray] | None,
        tokenizer,
        family: Family,
    ):
        self.name, self.path, self.config = name, path, config
        self._weights, self.tokenizer, self.family = weights, tokenizer, family
        self._models: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def is_card(self) -> bool:
        """True for a card: no weights in this process."""
        return self._weights is None

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """Tensor name → float32 array (read and validated when the checkpoint was loaded)."""
        if self._weights is None:
            raise RuntimeError(
                f"the checkpoint card {self.name!r} holds no weights: its math runs where the weights are "
                "loaded (a worker's task, or pretrained.load(source) in a library user's process)"
            )
        return self._weights

    @property
    def kind(self) -> str:
        """The kind of model: "encoder" (bidirectional) or "decoder" (causal)."""
        return self.config.kind

    @property
    def n_tokens(self) -> int:
        """The tokenizer's vocabulary size (the embedding may have more rows, never used)."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def nbytes(self) -> int:
        """The bytes of the weights held here (0 for a card)."""
        return 0 if self._weights is None else sum(w.nbytes for w in self._weights.values())

    def encode(self, text: str, text_pair: str | None = None) -> tuple[list[int], list[int], list[str]]:
        """Token ids, token-type ids and tokens (special tokens included; encoders truncate to their limit)."""
        check_text("text", text, "a non-empty string")
        if text_pair is not None:
            if self.kind == "decoder":
                raise SpecError("text_pair", text_pair, "None: a decoder reads one text")
            check_text("text_pair", text_pair, "None or a non-empty string")
        enc = self.tokenizer.encode(text, text_pair) if text_pair else self.tokenizer.encode(text)
        if not enc.ids:
            raise SpecError("text", text, "a text the tokenizer turns into at least one token")
        limit = self.config.max_position_embeddings
        if len(enc.ids) > limit:  # decoders only: encoders truncate
            raise SpecError(
                "text",
                text,
                f"at most {limit} tokens, the model's positions",
                value_text=f"{len(enc.ids)} tokens",
            )
        return enc.ids, enc.type_ids, enc.tokens

    def labels(self, ids: list[int]) -> list[str]:
        """Each token as readable text (byte-level tokens decoded: "Ġcat" → " cat")."""
        if self.kind == "encoder":
            return [self.tokenizer.id_to_token(i) for i in ids]
        return [self.tokenizer.decode([i], skip_special_tokens=False) for i in ids]

    def layer_params(self, layer: int) -> dict[str, np.ndarray]:
        """Layer `layer`'s self-attention weights in attnviz's `x @ W` layout (see `init_params`)."""
        return self.family.attention(self.weights, self.config, layer)

    def model(self, framework: str, device: str = "cpu"):
        """The framework's model with these weights on `device`, built once per device and kept.

        Built in the process that asks (a worker: the weights reach a GPU there, float32, and stay).
        `device`: "cpu" | "gpu" | "auto"; "gpu" where the framework sees none is a `SpecError` on
        field "device" naming what is allowed."""
        check_framework(framework)
        be = backend(framework)
        dev = be.resolve_device(check_device(device))
        key = (framework, be.device_kind(dev))
        with self._lock:
            if key not in self._models:
                self._models[key] = self.family.model(be)(self, device=dev)
            return self._models[key]

    def check_ablate(self, ablate: Any) -> dict[int, dict[int, str]]:
        """`{(layer, head): "zero" | "mean"}` → `{layer: {head: mode}}`, or a `SpecError`."""
        return merge(check_ablate(ablate, *self._layers_heads()), {})

    def _layers_heads(self) -> tuple[int, int]:
        return self.config.num_hidden_layers, self.config.num_attention_heads

    def run(
        self,
        text: str,
        framework: str = "torch",
        text_pair: str | None = None,
        *,
        ablate: dict[tuple[int, int], str] | None = None,
        patch: dict[tuple[int, int], np.ndarray] | None = None,
        capture_layer: int | None = None,
        head_outputs: bool = False,
        edit: dict[tuple[int, int], dict[int, np.ndarray]] | None = None,
        window: int | None = None,
        device: str = "cpu",
    ) -> ModelOutput:
        """Run the whole model on `text` (and `text_pair`) in `framework`.

        Args:
            ablate: `{(layer, head): "zero" | "mean"}`: "zero" removes the head's contribution
                to the layer's output projection; "mean" replaces the head's output by its mean
                over positions.
            patch: `{(layer, head): z (T, head_dim)}`: that head's output replaced by `z`
                (activation patching); composes with `ablate` (on other heads).
            capture_layer: record that layer's attention steps (`ModelOutput.steps`).
            head_outputs: fill `ModelOutput.head_outputs`.
            edit: `{(layer, head): {query: row (T,)}}` (decoders): that head's attention row at
                that query replaced by `row` before it multiplies V; the model runs on. Rows are
                checked (`attnviz.pretrained.edits`; `only_key`, `drain_sink`, `zero_key` build
                one); composes with `ablate` and `patch` on other heads.
            window: narrow the local (sliding-window) layers' window to this many tokens
                (Gemma 3); a model without local layers refuses it.
            device: "cpu" | "gpu" | "auto": where the model runs (float32; the same numbers as the
                CPU's within float32 rounding).
        """
        ids, type_ids, tokens = self.encode(text, text_pair)
        return self._run_ids(
            ids, type_ids, tokens, framework, ablate=ablate, patch=patch, capture_layer=capture_layer,
            head_outputs=head_outputs, edit=edit, window=window, device=device,
        )  # fmt: skip

    def run_ids(self, ids: list[int], framework: str = "torch", **options: Any) -> ModelOutput:
        """`run` on token ids instead of a text (a head-role scan reads random tokens).

        Args:
            ids: `(T,)` token ids, each `0 … n_tokens − 1`, at most the model's positions.
            options: `run`'s keyword options (`ablate`, `patch`, `capture_layer`, `head_outputs`,
                `edit`, `window`, `device`).
        """
        ids = check_ids(ids, self.n_tokens, self.config.max_position_embeddings)
        return self._run_ids(ids, [0] * len(ids), self.labels(ids), framework, **options)

    def _run_ids(
        self,
        ids: list[int],
        type_ids: list[int],
        tokens: list[str],
        framework: str = "torch",
        *,
        ablate: dict[tuple[int, int], str] | None = None,
        patch: dict[tuple[int, int], np.ndarray] | None = None,
        capture_layer: int | None = None,
        head_outputs: bool = False,
        edit: dict[tuple[int, int], dict[int, np.ndarray]] | None = None,
        window: int | None = None,
        device: str = "cpu",
    ) -> ModelOutput:
        """`run` on ids already tokenized."""
        L, H = self._layers_heads()
        ablated = check_ablate(ablate, L, H)
        patched = check_patch(patch, L, H, (len(ids), self.config.head_dim))
        replace = merge(ablated, patched)
        check_layer("capture_layer", capture_layer, L)
        layout = self.family.layout(self.config) if self.family.layout else None
        edit, window = check_changes(edit, window, layout, len(ids), {*ablated, *patched})
        changes = {"edit": row_edits(edit, H, len(ids)), "window": window} if edit or window else {}
        model = self.model(framework, device)
        out = model(
            ids, type_ids, replace=replace, capture_layer=capture_layer, head_outputs=bool(head_outputs),
            **changes,
        )  # fmt: skip
        _check_finite(out)
        return ModelOutput(
            tokens, out.attentions, out.last_hidden_state, framework, list(ids), out.logits, out.steps,
            capture_layer, dict(ablate or {}), out.hidden_states, out.head_outputs, patched, edit, window,
            backend(framework).device_kind(model.device),
        )  # fmt: skip

    def logit_lens(
        self, output: ModelOutput, *, layers: slice = slice(None), positions: slice = slice(None)
    ) -> np.ndarray:
        """`(layers + 1, T, vocab)`: the final norm and the unembedding applied to each entry of
        `output.hidden_states` (nostalgebraist, 2020); the last equals `output.logits`.

        `layers` and `positions` select a block of it (`attnviz.interp.lens` reads it chunk by
        chunk, so its peak stays one chunk of `(…, vocab)` logits).
        """
        ok = isinstance(output, ModelOutput) and output.hidden_states is not None
        if not (ok and output.hidden_states.shape[-1] == self.config.hidden_size):
            raise SpecError("output", output, "a ModelOutput of this checkpoint's run")
        model = self.model(output.framework, output.device)
        if self.kind != "decoder" or not hasattr(model, "lens"):
            raise SpecError("logit_lens", self.name, "a decoder checkpoint", value_text="an encoder")
        return model.lens(np.ascontiguousarray(output.hidden_states[layers, positions]))

    def ablation_effect(self, before: ModelOutput, after: ModelOutput) -> dict[str, Any]:
        """How much an ablation changed the model's output.

        Encoders: `sentence_cosine`, the cosine between the mean-pooled last hidden states, and
        `token_cosine (T,)` per token. Decoders: `kl (T,)`, KL(before ‖ after) of each position's
        next-token distribution in nats, and `kl_last`, that of the last position.
        """
        if self.kind == "encoder":
            return {
                "sentence_cosine": float(
                    cosine_similarity(before.last_hidden_state.mean(0), after.last_hidden_state.mean(0))
                ),
                "token_cosine": cosine_similarity(before.last_hidden_state, after.last_hidden_state),
            }
        p, q = (softmax_rows(o.logits) for o in (before, after))
        kl = kl_divergence(p, q)
        return {"kl": kl, "kl_last": float(kl[-1])}

    def head_importance(
        self,
        text: str,
        framework: str = "torch",
        *,
        mode: str = "zero",
        monitor: Monitor | None = None,
        device: str = "cpu",
    ) -> np.ndarray:
        """Ablate each head in turn (`mode` "zero" or "mean"): `(layers, heads)` of its effect —
        1 − `sentence_cosine` for encoders, `kl_last` for decoders (higher: the head matters more).

        `monitor` is told `(done, total)` after each of the layers × heads runs; a stop ends the
        work there (`Stop`).
        """
        if mode not in ABLATIONS:
            raise SpecError("mode", mode, " | ".join(map(repr, ABLATIONS)))
        ids, type_ids, tokens = self.encode(text)
        before = self._run_ids(ids, type_ids, tokens, framework, device=device)
        L, H = self._layers_heads()
        importance, monitor = np.zeros((L, H)), watch(monitor)
        for layer in range(L):
            for head in range(H):
                ablate = {(layer, head): mode}
                after = self._run_ids(ids, type_ids, tokens, framework, ablate=ablate, device=device)
                effect = self.ablation_effect(before, after)
                importance[layer, head] = (
                    1 - effect["sentence_cosine"] if self.kind == "encoder" else effect["kl_last"]
                )
                monitor.step(layer * H + head + 1, L * H)
        return importance

    def next_tokens(
        self, logits: np.ndarray, k: int = 10, temperature: float = 1.0
    ) -> list[tuple[str, float]]:
        """The `k` most likely next tokens after one position's `logits (vocab,)`, with probabilities."""
        k = check_k("k", k, none_ok=False)
        probs = next_token_probabilities(logits[: self.n_tokens], temperature)
        top = np.argsort(-probs, kind="stable")[:k]
        return [(self.tokenizer.decode([int(i)], skip_special_tokens=False), float(probs[i])) for i in top]

    def generate(
        self,
        text: str,
        framework: str = "torch",
        max_new_tokens: int = 20,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        cache: bool = True,
        *,
        stop_at: Collection[int] = (),
        monitor: Monitor | None = None,
        device: str = "cpu",
    ) -> Generation:
        """Add `max_new_tokens` tokens to `text`, one at a time, sampled from the next-token
        distribution at `temperature` (0: always the most likely token) among the `top_k` most likely.

        With `cache` (the default) the prompt runs once and each new token runs one position
        through the layers, reading and extending every layer's keys and values (a `KVCache`
        this call owns: the model is shared); without it, every token reruns the whole sequence.
        Both give the same tokens. The same `seed` gives the same tokens. The returned `output` is
        one run over the whole sequence: causal attention makes its row for each new token the
        attention that token had when it was generated.

        Args:
            stop_at: token ids that end the generation once drawn (kept): `end_tokens()`.
            monitor: told `(done, max_new_tokens)` and the partial `(token id, probability)` as
                each new token is drawn (a page shows them as they come); asked before each new
                token after the first whether to stop, which ends the generation with the tokens
                so far.
            device: "cpu" | "gpu" | "auto": where the model runs; its KV cache stays there.

        `Generation.ended` says why it ended: "limit" (`max_new_tokens`), "end token" or "stopped".
        """
        if self.kind != "decoder":
            raise SpecError("generate", self.name, "a decoder checkpoint", value_text="an encoder")
        prompt = self.encode(text)[0]
        self._check_generation(len(prompt), max_new_tokens, seed)
        pick = sampler(self.n_tokens, temperature, top_k, seed)  # refuses bad settings before any run
        kv = self.model(framework, device).new_cache() if cache else None
        monitor = watch(monitor)
        drawn, ended = decode(
            lambda ids, new: self._next_logits(ids, new, framework, kv, device), prompt, max_new_tokens, pick,
            stop=monitor.stopped, stop_at=stop_at,
            observe=lambda d, done: monitor.report(done, max_new_tokens, (d.token, d.probability)),
        )  # fmt: skip
        ids = [*prompt, *(d.token for d in drawn)]
        tokens = [self.tokenizer.id_to_token(i) for i in ids]
        final = self._run_ids(ids, [0] * len(ids), tokens, framework, device=device)
        text_out = self.tokenizer.decode(ids, skip_special_tokens=False)
        return Generation(
            final,
            len(prompt),
            text_out,
            [d.probability for d in drawn],
            np.stack([d.logits for d in drawn]),
            None if kv is None else kv.nbytes,
            ended,
        )

    def end_tokens(self) -> list[int]:
        """The ids that end a text or a turn: config.json's `eos_token_id` (one or a list) and the
        tokenizer's own end tokens (`<|endoftext|>`, `<|im_end|>`, `<eos>`, `<end_of_turn>`, `</s>`)."""
        found = set()
        config = self.path / "config.json"
        if config.is_file():
            try:
                eos = json.loads(config.read_text()).get("eos_token_id")
            except (OSError, ValueError, AttributeError):  # unreadable here: the tokenizer's names remain
                eos = None
            found |= {int(i) for i in (eos if isinstance(eos, list) else [eos]) if is_index(i)}
        for token in END_TOKENS:
            if (i := self.tokenizer.token_to_id(token)) is not None:
                found.add(int(i))
        return sorted(i for i in found if 0 <= i < self.n_tokens)

    def _next_logits(
        self, ids: list[int], new: list[int], framework: str, kv: Any, device: str = "cpu"
    ) -> np.ndarray:
        """The next-token logits `(vocab,)` after `ids`: running only the `new` ids over the cache
        `kv`, or (`kv` None) the whole of `ids` again."""
        if kv is None:
            return self._run_ids(ids, [0] * len(ids), [], framework, device=device).logits[-1]
        logits = self.model(framework, device).step(new, kv)  # (1, vocab): the last new position's
        if not np.isfinite(logits).all():
            raise CheckpointError(
                WEIGHTS, "logits", "weights whose forward pass overflows float32 (NaN or inf)",
                "weights of usual size",
            )  # fmt: skip
        return logits[-1]

    def _check_generation(self, n_ids: int, max_new_tokens: Any, seed: Any) -> None:
        positions = self.config.max_position_embeddings
        room = min(positions - n_ids, MAX_NEW_TOKENS)
        if not (is_index(max_new_tokens) and 1 <= max_new_tokens <= room):
            raise SpecError(
                "max_new_tokens",
                max_new_tokens,
                f"1 … {room} (the model has {positions} positions; the text uses {n_ids})",
            )
        if not (is_index(seed) and seed >= 0):
            raise SpecError("seed", seed, "an integer ≥ 0")


def _check_finite(out: Forward) -> None:
    """A forward pass that overflowed: say where (the weights passed their checks, so they are
    finite but too large together)."""
    stream = [("the embeddings" if i == 0 else f"layer {i - 1}", h) for i, h in enumerate(out.hidden_states)]
    for where, value in [*stream, ("attentions", out.attentions), ("logits", out.logits)]:
        if value is not None and not np.isfinite(value).all():
            raise CheckpointError(
                WEIGHTS, where, "weights whose forward pass overflows float32 (NaN or inf)",
                "weights of usual size",
            )  # fmt: skip


def without_special(attn: np.ndarray, tokens: list[str]) -> tuple[np.ndarray, list[str]]:
    """Drop [CLS] / [SEP] rows and columns and renormalise each remaining row to sum to 1.

    Raises:
        ValueError: no token is left (the text was only special or invisible characters).
    """
    keep = [i for i, t in enumerate(tokens) if t not in SPECIAL_TOKENS]
    if not keep:
        raise ValueError(
            "no tokens left after hiding [CLS] and [SEP]: the text has no other tokens "
            "(it is empty, only special tokens, or only invisible characters). "
            "Type a word, or show [CLS] and [SEP]."
        )
    sub = attn[..., keep, :][..., keep]
    total = sub.sum(-1, keepdims=True)
    return np.divide(sub, total, out=np.zeros_like(sub), where=total > 0), [tokens[i] for i in keep]
