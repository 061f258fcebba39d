"""The FlashAttention page's computations: one real head's q, k, v captured from a checkpoint, replayed
tile by tile (`attnviz.kernels`), and the KV-cache sizes of the decoders on offer.

Both run in a worker process through `attnviz.app.frame.door`: the capture runs the model
(`attnviz.pretrained.tasks.forward`), the replay records every tile (`attnviz.app.tiles.tasks.tiled`: 1,024 tiles of a
128-token prompt take seconds of small framework calls). Both are kept in the server's
byte-bounded cache (`attnviz.app.frame.results`), keyed by hashable settings only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnviz import masks, reference
from attnviz.app.frame import door, results
from attnviz.app.frame.checkpoints import checkpoint_choices, open_checkpoint
from attnviz.app.tiles import tasks
from attnviz.errors import SpecError
from attnviz.formats import size
from attnviz.kernels import TiledAttention, kv_cache_size
from attnviz.kernels.kv_cache import LENGTHS
from attnviz.kernels.tiles import memory
from attnviz.pretrained.tasks import forward

MAX_TOKENS = 128  # a prompt's tokens the page replays
MAX_TILES = 1024  # tiles one replay records (each keeps its scores, m, l and output so far)
PRECISIONS = {"float32": np.float32, "float64": np.float64}  # float32: as the model ran


@dataclass(frozen=True)
class Capture:
    """One layer's attention inputs from a real run: q, k, v `(1, H, L, d)` after positions (RoPE) and
    with K/V heads repeated for the query heads they serve; `context (1, H, L, Dv)` the model's own
    attention output; `causal` for a decoder."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    context: np.ndarray
    tokens: list[str]
    causal: bool


@dataclass(frozen=True)
class Replay:
    """A head replayed: the tiled pass, the full softmax (float64 NumPy, the same q, k, v) and the
    model's own output for the head, `(1, 1, L, Dv)` each."""

    tiled: TiledAttention
    full: np.ndarray
    model: np.ndarray
    tokens: list[str]
    d_k: int


def _first(steps: dict, *names: str) -> np.ndarray:
    return next(steps[n] for n in names if n in steps)


@results.bounded("tiles capture", ttl=600)
def capture(name: str, text: str, framework: str, layer: int) -> Capture:
    """Layer `layer`'s q, k, v and output on `text`, from a run of the model in a worker.

    Raises:
        TaskError: the run ended without a value (`door.show_failure` says why).
    """
    ckpt = open_checkpoint(name)
    out = door.run(
        forward, str(ckpt.path), text, framework, capture_layer=layer,
        spinner="Running the model and keeping one layer's q, k, v",
    )  # fmt: skip
    steps = {s.name: s.value for s in out.steps}
    q = _first(steps, "q_rope", "q_heads")  # (1, H, L, Dk)
    k = _first(steps, "k_repeated", "k_rope", "k_heads")  # (1, H, L, Dk): one K/V head per query head
    v = _first(steps, "v_repeated", "v_heads")  # (1, H, L, Dv)
    return Capture(q, k, v, steps["context"], ckpt.labels(out.ids), ckpt.kind == "decoder")


def check_size(n_tokens: int, block_q: int, block_k: int) -> None:
    """Refuse prompts over `MAX_TOKENS` and block sizes giving more than `MAX_TILES` tiles."""
    if n_tokens > MAX_TOKENS:
        raise SpecError(
            "text", f"{n_tokens} tokens", f"at most {MAX_TOKENS} tokens", value_text=f"{n_tokens} tokens"
        )
    tiles = -(-n_tokens // block_q) * -(-n_tokens // block_k)
    if tiles > MAX_TILES:
        raise SpecError("block_k", block_k, f"blocks giving at most {MAX_TILES} tiles ({n_tokens} tokens in "
                        f"{block_q} × {block_k} blocks make {tiles}); take larger blocks")  # fmt: skip


def replay(name: str, text: str, framework: str, layer: int, head: int, block_q: int, block_k: int,
           precision: str) -> Replay:  # fmt: skip
    """Head `head` of layer `layer` on `text`, replayed in `block_q × block_k` tiles (checked first)."""
    ckpt = open_checkpoint(name)
    check_size(len(ckpt.encode(text)[0]), block_q, block_k)
    return _replay(name, text, framework, layer, head, block_q, block_k, precision)


@results.bounded("tiles replay", ttl=600)
def _replay(name: str, text: str, framework: str, layer: int, head: int, block_q: int, block_k: int,
            precision: str) -> Replay:  # fmt: skip
    cap = capture(name, text, framework, layer)
    q, k, v = (
        x[:, head : head + 1].astype(PRECISIONS[precision]) for x in (cap.q, cap.k, cap.v)
    )  # (1, 1, L, d)
    tiled = door.run(
        tasks.tiled,
        q,
        k,
        v,
        block_q,
        block_k,
        cap.causal,
        framework,
        spinner="Replaying the head tile by tile",
    )
    mask = masks.causal(q.shape[2]) if cap.causal else None
    full = reference.scaled_dot_product_attention(q, k, v, mask)[0]  # (1, 1, L, Dv) float64
    return Replay(tiled, full, cap.context[:, head : head + 1], cap.tokens, q.shape[-1])


def memory_by_length(n_tokens: int, d_k: int, d_v: int, block_q: int, block_k: int, itemsize: int):
    """(lengths, tiled bytes, L × L bytes) for one head, from 8 tokens to 32k, the prompt's length included."""
    lengths = np.unique(np.r_[np.geomspace(8, max(LENGTHS), 25).astype(int), n_tokens, LENGTHS])
    held = [memory(1, n, n, d_k, d_v, block_q, block_k, itemsize) for n in lengths]
    return lengths, np.array([m.tiled for m in held]), np.array([m.full for m in held])


def rounding(full: np.ndarray, precision: str) -> float:
    """The difference rounding alone leaves between two ways of computing `full` in `precision`: a few
    units in the last place of its largest value."""
    return float(8 * np.finfo(PRECISIONS[precision]).eps * np.abs(full).max())


def span(positions: range, one: str, many: str) -> str:
    """'queries 4–7'; a single position: 'key 16'."""
    if len(positions) == 1:
        return f"{one} {positions.start}"
    return f"{many} {positions.start}–{positions.stop - 1}"


def at_lengths(lengths: np.ndarray, tiled: np.ndarray, full: np.ndarray) -> str:
    """'At 4k tokens the matrix is 64 MiB, the tiles 4.09 KiB; at 32k, …' (`memory_by_length`'s arrays)."""
    where = {int(n): i for i, n in enumerate(lengths)}
    return "; ".join(
        f"at {n // 1024}k tokens the matrix is {size(full[where[n]])}, the tiles {size(tiled[where[n]])}"
        for n in LENGTHS
    )


@results.bounded("tiles kv table", ttl=600)
def kv_table() -> pd.DataFrame:
    """Each decoder on offer: its K/V layout and KV-cache bytes (float32, as attnviz runs it), per token and
    at 4k / 32k tokens, against plain multi-head attention."""
    rows = []
    for label, source in checkpoint_choices().items():
        config = open_checkpoint(source).config
        if config.kind != "decoder":
            continue
        kv = kv_cache_size(config)
        row = {"model": label, "layout": f"{kv.layout}: {kv.query_heads} query heads on {kv.kv_heads} K/V heads",
               "layers × head width": f"{kv.layers} × {kv.head_dim}", "per token": size(kv.per_token)}  # fmt: skip
        for n in LENGTHS:
            row[f"at {n // 1024}k"] = size(kv.at(n))
            row[f"at {n // 1024}k if MHA"] = size(kv.at(n, mha=True))
        rows.append(row)
    return pd.DataFrame(rows)
