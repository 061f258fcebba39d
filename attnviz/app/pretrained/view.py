"""One run of the Pretrained page as it is drawn (`View`): the tokens, the attention, what each
query may see (the causal mask, a local layer's window, narrowed or not), the K/V heads the query
heads share; its header, the head grid's titles and caption, and the per-head summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from attnviz import formats, masks, pretrained
from attnviz.app.frame.checkpoints import architecture
from attnviz.app.frame.literal import count, escape_markdown
from attnviz.app.pretrained import fields
from attnviz.frameworks import label
from attnviz.interp.roles import head_roles
from attnviz.plots.labels import kv_group_titles

URL = "query-params"


HIDDEN = (
    "[CLS] and [SEP] removed; each remaining row renormalised to sum to 1 (the model itself gave "
    "part of each row's weight to them)."
)


@dataclass
class View:
    """One run as the page draws it.

    Attributes:
        out: the model's output (all tokens).
        labels: every token as readable text (byte-level pieces decoded, spaces shown).
        attn: `(L, H, T, T)` attention drawn (special tokens removed and rows renormalised when hidden).
        tokens: the T tokens drawn.
        causal: whether the model is causal (a decoder).
        windows: per layer, how many keys a query sees (itself and the ones before), or None (all
            earlier ones): a local layer's sliding window, narrowed by the page's window control.
        kv_heads: the K/V heads the query heads share (as many as the heads: none shared).
    """

    out: object
    labels: list[str]
    attn: np.ndarray
    tokens: list[str]
    causal: bool
    windows: list[int | None] = field(default_factory=list)
    kv_heads: int = 0

    def blocked(self, n: int | None = None, layer: int | None = None) -> np.ndarray | None:
        """`(n, n)` True where a causal model cannot look (None for an encoder) — with `layer`, also
        the keys its window cuts; n: the drawn tokens."""
        if not self.causal:
            return None
        n = len(self.tokens) if n is None else n
        blocked = ~masks.causal(n)
        if window := self.window(layer):
            blocked |= np.subtract.outer(np.arange(n), np.arange(n)) >= window  # (query, key) too far back
        return blocked

    def window(self, layer: int | None) -> int | None:
        """Layer `layer`'s window when it cuts keys of this text (None: it sees every earlier token)."""
        if layer is None or not self.windows or self.windows[layer] is None:
            return None
        return self.windows[layer] if self.windows[layer] < len(self.tokens) else None


def view(ckpt, out, hide: bool) -> View:
    """The drawn attention and tokens of `out`; `hide` removes [CLS] and [SEP] (encoders).

    Raises:
        ValueError: no token is left once the special tokens are hidden.
    """
    labels = formats.tokens(ckpt.labels(out.ids))
    attn, tokens = out.attentions, labels
    if hide:
        attn, tokens = pretrained.without_special(attn, tokens)
    cfg = ckpt.config
    H = cfg.num_attention_heads
    return View(
        out, labels, attn, tokens, causal=ckpt.kind == "decoder", windows=layer_windows(ckpt, out.window),
        kv_heads=getattr(cfg, "num_key_value_heads", H),
    )  # fmt: skip


def layer_windows(ckpt, window: int | None = None) -> list[int | None]:
    """Per layer, the keys a query sees: a local layer's window (`window` when the page narrows
    it), None for a global layer or a family without local layers."""
    cfg = ckpt.config
    is_local = getattr(cfg, "is_local", None)
    if is_local is None:
        return [None] * cfg.num_hidden_layers
    return [(window or cfg.sliding_window) if is_local(i) else None for i in range(cfg.num_hidden_layers)]


def header(ckpt, v: View) -> str:
    """One line: framework, kind, what the model is (`architecture`), sizes."""
    return (
        f"**{label(v.out.framework)}** · {'causal decoder' if v.causal else 'encoder'} · "
        f"{architecture(ckpt.config, window=v.out.window)} · {len(v.out.ids)} tokens · hidden size {v.out.last_hidden_state.shape[-1]}"
    )


def window_control(ckpt) -> int | None:
    """For a family with local (sliding-window) layers, "show the window at N tokens": the window
    the page runs the local layers with (None: the model's own), said to be a change to the model."""
    cfg = ckpt.config
    if getattr(cfg, "is_local", None) is None:
        return None
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    on = c1.toggle(
        "Show the window at N tokens (changes the model)", key="pre.narrow", bind=URL,
        help=f"The local layers' window is {cfg.sliding_window:,} tokens: a short text never reaches it. "
        "A narrower one shows what the window does.",
    )  # fmt: skip
    n = fields.WINDOW.number_input(c2, high=cfg.sliding_window, disabled=not on)
    if not on:
        return None
    local = sum(cfg.is_local(i) for i in range(cfg.num_hidden_layers))
    st.warning(
        f"**A changed model.** Its {local} local layers see only the last {count(int(n), 'token')} "
        f"(each token itself and the {int(n) - 1} before it) instead of {cfg.sliding_window:,}; the global "
        f"layers are unchanged. Every number on this page is the changed model's; keys cut by the window "
        "are drawn ✕.",
        icon=":material/construction:",
    )
    return int(n)


def grid_caption(v: View, layer: int) -> str:
    """What the head grid's ✕ cells are: the future, and keys outside the layer's window."""
    said = "Causal attention: each token sees only itself and the tokens before it (✕: blocked)."
    if (window := v.window(layer)) is not None:
        said += (
            f" This layer is local: each token sees only itself and the {window - 1} tokens before it — "
            f"the ✕ cells left of the band are keys the window cuts."
        )
    if 0 < v.kv_heads < v.attn.shape[1]:
        H = v.attn.shape[1]
        said += (
            f" One row of panels per K/V head: {v.kv_heads} shared by {H} query heads, "
            f"{H // v.kv_heads} per K/V head."
        )
    return said


def panel_columns(v: View) -> int | None:
    """Panels per row of the head grid: one row per K/V head where query heads share them (the
    explorer's grouping), else the grid's default."""
    H = v.attn.shape[1]
    return H // v.kv_heads if 0 < v.kv_heads < H else None


def summary_rows(v: View, layer: int) -> list[dict]:
    """The per-head summary table of `layer`: what each head does on this text."""
    if len(v.tokens) < 2:
        return []
    sink = sink_scores(v.out.attentions[layer])
    rows = []
    for r in head_roles(v.attn[layer], v.tokens, causal=v.causal):
        rows.append(
            {
                "head": r.head,
                "what it does": r.role + (f" ({r.strength:.0%})" if r.strength is not None else ""),
                "offset": f"{r.offset:+d} ({r.offset_score:.0%})",
                "previous token": f"{r.previous:.0%}",
                "same token": f"{r.same:.0%}",
                "first token": f"{r.first:.0%}",
                "attention sink": f"{sink[r.head]:.0%}",
                "spread": f"{r.entropy_share:.0%}",
            }
        )
    return rows


def sink_scores(attn: np.ndarray) -> np.ndarray:
    """`(H,)` each head's attention-sink score: the mean weight its queries 1 … T−1 give to token 0, on the
    model's own attention `(H, T, T)` (special tokens included: [CLS] or a decoder's first token)."""
    return attn[:, 1:, 0].mean(-1) if attn.shape[-1] > 1 else np.zeros(attn.shape[0])


def panel_titles(v: View, layer: int) -> list[str]:
    """Each head's panel named by what it does in a word ("head 2 · previous"), short enough for two
    panels side by side on a phone (one token: "head 2"), and — where query heads share K/V heads —
    the K/V head it reads ("head 2 · previous · K/V 0")."""
    H = v.attn.shape[1]
    titles = [f"head {h}" for h in range(H)]
    if len(v.tokens) >= 2:
        roles = head_roles(v.attn[layer], v.tokens, causal=v.causal)
        titles = [f"head {r.head}" + (f" · {r.short}" if r.short else "") for r in roles]
    return kv_group_titles(H, v.kv_heads, titles) if 0 < v.kv_heads < H else titles


def summary_caption(v: View, hidden: bool) -> str:
    first = v.tokens[0].strip()
    return (
        "Each score is the mean weight a token gives to a position, over every token but the first: "
        "**previous token** (offset −1), **same token** (offset 0), **first token** "
        f"(“{escape_markdown(first)}”); **offset**: the relative position (−3 … "
        + ("0" if v.causal else "+3")
        + ") with the most weight. **What it does** names the position that gets at least half of the "
        "weight; otherwise *broad* (entropy at least 85 % of what its row could reach) or *no fixed position* "
        "(where it looks depends on the words). **Spread**: entropy as a share of its maximum (log of the keys the "
        "token may see). **Attention sink**: the mean weight tokens 1 … T−1 give to the sequence's first token "
        "in the model's own attention (special tokens included) — a head with nothing to do parks its weight "
        "there. "
        + (
            "[CLS] and [SEP] are hidden: the scores are over the words only."
            if hidden
            else ("[CLS] and [SEP] are included. " if not v.causal else "")
            + "Nothing is hidden here, so **first token** and **attention sink** read the same weight "
            "and show the same number; they differ when the page hides an encoder's special tokens."
        )
    )
