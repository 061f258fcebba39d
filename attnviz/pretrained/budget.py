"""Peak memory of what a loaded checkpoint is asked to do, estimated from shapes before running.

Every door of the Pretrained and Interpretability pages that grows with the text, the model or its
vocabulary (one forward pass, the logit lens, generation, a patching sweep, head importance, the
head-role scan and the ablation built on it) has an estimate here, in bytes, as a function of the
number of tokens. `check` refuses a door over its budget before anything is allocated, with the
estimate and the largest number of tokens that fits.

Shapes: L layers, H heads, T tokens, D hidden width, I the MLP's width, V the unembedding's rows.

One forward pass (either framework) holds at its peak: the attention weights of every layer twice
(the per-layer list and the stacked `(L, H, T, T)` copy), three `(H, T, T)` grids of the layer being
computed (scores, mask, weights), the residual stream twice (`(L + 1, T, D)`), the logits twice
(`(T, V)`: the tensor and its NumPy copy; a decoder's only) and three `(T, I)` MLP activations, all float32; a 25 %
margin covers the allocator. Measured on SmolLM2-135M (T = 64, 128, 256): the process's peak grew
52, 112 and 289 MiB; the estimate says 53, 129 and 346 MiB (`tests/exec/test_door_budgets.py` checks it).
At the largest text each model's check accepts (MiniLM 512, all its positions; SmolLM2 208; Gemma 3
94 tokens), a worker's peak was 139-217 MiB in either framework against estimates of 249-255 MiB
(`tests/exec/test_forward_budget.py`, docs/security.md).
"""

from __future__ import annotations

from collections.abc import Callable

from attnviz import formats
from attnviz.cache import MIB
from attnviz.errors import BudgetError

F32, F64 = 4, 8
MARGIN = 1.25
LENS_CHUNK_BYTES = 8 * MIB  # one chunk of lens logits, float64 (the lens keeps only its top k)
LENS_TOP = 5


def _shape(config) -> tuple[int, int, int, int, int]:
    """`(L, H, D, I, V)` of a checkpoint's configuration."""
    D = config.hidden_size
    # A Training-lab checkpoint's config names neither: its MLP is 4·D wide, its vocabulary its task's.
    I = getattr(config, "intermediate_size", None) or 4 * D
    V = getattr(config, "vocab_size", None) or config.train.vocab
    return config.num_hidden_layers, config.num_attention_heads, D, I, V


def forward_bytes(config, T: int, *, head_outputs: bool = False) -> int:
    """Peak bytes of one forward pass over `T` tokens (see the module docstring)."""
    L, H, D, I, V = _shape(config)
    logits = 2 * T * V if config.kind == "decoder" else 0  # an encoder returns no logits
    floats = 2 * L * H * T * T + 3 * H * T * T + 2 * (L + 1) * T * D + logits + 3 * T * I
    if head_outputs:
        floats += 2 * L * T * D  # `(L, H, T, Dh)`, listed then stacked
    return int(MARGIN * F32 * floats)


def lens_chunk(config) -> int:
    """Positions per chunk of the lens: `chunk × V` float64 logits within `LENS_CHUNK_BYTES`."""
    return max(1, LENS_CHUNK_BYTES // (3 * F64 * config.vocab_size))


def lens_bytes(config, T: int, k: int = LENS_TOP) -> int:
    """The logit lens over `T` tokens, layer by layer and chunk by chunk, keeping the top `k` per cell:
    the forward pass, one chunk's logits (float32, then float64 probabilities and their order), and
    the table (`(L + 1, T, k)` ids, probabilities and labels)."""
    L, _, _, _, V = _shape(config)
    chunk = min(T, lens_chunk(config)) * V * (F32 + 3 * F64)
    table = (L + 1) * T * k * (8 + 8 + 80)  # int64, float64, a short str object
    return forward_bytes(config, T) + int(MARGIN * chunk) + table


def generation_bytes(config, T: int, new_tokens: int) -> int:
    """Generating `new_tokens` after `T` prompt tokens: two forward passes over the longest sequence
    alive at once (the step's run, and the previous one until it is replaced)."""
    return 2 * forward_bytes(config, T + new_tokens)


def sweep_bytes(config, T: int) -> int:
    """A patching sweep on prompts of `T` tokens: the clean run (with head outputs), the corrupted
    run and the patched run alive at once."""
    return forward_bytes(config, T, head_outputs=True) + 2 * forward_bytes(config, T)


def importance_bytes(config, T: int) -> int:
    """Head importance on `T` tokens: the unablated run and one ablated run alive at once, and the
    comparison of their next-token distributions (a decoder's KL: five `(T, V)` float64 arrays)."""
    _, _, _, _, V = _shape(config)
    kl = 5 * T * V * F64 if config.kind == "decoder" else 0
    return 2 * forward_bytes(config, T) + int(MARGIN * kl)


def scan_bytes(config, half: int) -> int:
    """A head-role scan (and the ablation comparison that reruns its sequences): one forward pass over
    `2·half` tokens, plus the first sequence's attention kept in float64, and the current one's
    float32 weights with their float64 copy."""
    L, H, *_ = _shape(config)
    T = 2 * half
    return forward_bytes(config, T) + int(MARGIN * (2 * F64 + F32) * L * H * T * T)


SPEECH_ROWS = 228  # a transcription's decoder rows at most: 224 text tokens, the start tokens, the end


def speech_bytes(config, positions: int = 0) -> int:
    """Whisper transcribing a clip, always over its whole window of `A = audio_positions` (30 s), and
    keeping the encoder's self-attention among the first `positions` (0: none). Its peak holds one
    encoder layer's three `(H, A, A)` grids (scores, weights, the softmax's temporary), the encoder's
    activations (`(2A, D)` after the first convolution, four `(A, D)` and three `(A, ffn)`), every
    decoder layer's keys and values of the sound (`2 · Ld · (A, D)`), the cross-attention rows of up
    to `SPEECH_ROWS` steps twice (the per-step list and the stacked `(Ld, H, rows, A)`), and the kept
    encoder view twice (the per-layer list and the stacked `(Le, H, n, n)`), all float32, with the
    forward pass's 25 % margin. Measured on whisper-tiny.en with a 30-s clip of 224 tokens
    (`tests/exec/test_forward_budget.py`): peak 247 / 266 MiB without the view (torch / TensorFlow), 522 / 448
    MiB with all 1,500 positions; this says 348 and 863 MiB. With 800 positions (16 s): 292 / 356 MiB
    in a fresh worker, 415 MiB in TensorFlow in one that had run four models; this says 514 MiB."""
    A, H, D = config.audio_positions, config.n_heads, config.d_model
    encoder = 3 * H * A * A + 2 * 2 * A * D + 4 * A * D + 3 * A * config.ffn
    decoder = 2 * config.decoder_layers * A * D + 2 * config.decoder_layers * H * SPEECH_ROWS * A
    view = 2 * config.encoder_layers * H * positions * positions
    return int(MARGIN * F32 * (encoder + decoder + view))


def largest(need: Callable[[int], int], budget: int, high: int) -> int:
    """The largest `n ≤ high` with `need(n) ≤ budget` (`need` grows with n); 0 if none."""
    lo, hi = 0, high
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid - 1)
    return lo


def check(what: str, need: Callable[[int], int], n: int, budget: int, unit: str = "tokens") -> int:
    """Refuse `what` on `n` units when `need(n)` bytes exceed `budget`; the estimate otherwise.

    Raises:
        BudgetError: naming the estimate, the budget and the largest `n` that fits.
    """
    estimate = need(n)
    if estimate > budget:
        fits = largest(need, budget, n)
        hint = f"at most {fits:,} {unit} fit" if fits else "nothing this long fits"
        raise BudgetError(
            f"{what} on {n:,} {unit} needs about {formats.size(estimate)}, over this server's "
            f"{formats.size(budget)} per run; allowed: {hint} (shorten the input).",
            estimate,
            budget,
        )
    return estimate
