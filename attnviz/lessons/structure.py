"""Steps 4–6: masks, heads, shapes.

Masks come from `attnviz.masks` (the causal mask and `misread`, which applies
one API's mask convention to a mask built for another), the four heads from
`attnviz.heads.build`, the shapes from the steps `attnviz.reference` records.
"""

from __future__ import annotations

import numpy as np

from attnviz import heads, masks, reference
from attnviz.lessons.core import (
    CELLS,
    CHOICE,
    SHAPE,
    Exercise,
    Link,
    Part,
    app_config,
    config_seed,
    names,
    parse_shape,
    rng,
    shape_text,
)
from attnviz.params import init_params, make_inputs
from attnviz.spec import AttentionSpec

BUILT = "additive mask · −1e9 (TensorFlow tutorial style)"  # 1 = blocked
PASSED = "keras.layers.MultiHeadAttention attention_mask"  # 1 = may attend
PANELS = ("A", "B", "C", "D")


def _keys(ks, picked) -> str:
    chosen = [k for k, p in zip(ks, picked, strict=True) if p]
    return ", ".join(chosen) if chosen else "no key at all"


def _cells_check(blocked: np.ndarray, qs, ks):
    def check(picked) -> tuple[bool, str]:
        picked = np.asarray(picked, dtype=bool)
        if (picked == blocked).all():
            return True, "Right: each query sees itself and the keys before it; every later key is blocked."
        if (picked == ~blocked).all():
            return (
                False,
                "You picked the cells that stay open. The mask blocks the others: each query's later keys.",
            )
        if (picked == blocked.T).all():
            return (
                False,
                "That blocks the past. A causal mask blocks the future: query i must not see keys after i.",
            )
        if picked.diagonal().any():
            return (
                False,
                "A token may attend to itself: the diagonal stays open. Only keys after the query are blocked.",
            )
        rows = [q for q, p, b in zip(qs, picked, blocked, strict=True) if (p != b).any()]
        first_row = qs.index(rows[0])
        return False, (
            f"Rows {', '.join(rows)} are off. For example {rows[0]} may see {_keys(ks, ~blocked[first_row])} "
            f"and must not see {_keys(ks, blocked[first_row])}."
        )

    return check


def mask(seed: int, step: int = 3) -> Exercise:
    """Which cells does a causal mask block; what does a 1-is-blocked mask do in a 1-is-allowed API?"""
    g = rng(seed, step)
    n = int(g.integers(4, 6))
    row = int(g.integers(n - 1))  # not the last: it would see nothing at all
    qs, ks = names("q", n), names("k", n)
    allowed = masks.causal(n)
    applied = masks.misread(allowed, BUILT, PASSED)
    sets = [applied[row], allowed[row], np.ones(n, bool), np.eye(n, dtype=bool)[row]]
    options, seen = [], set()
    for s in sets:
        text = _keys(ks, s)
        if text not in seen:
            seen.add(text)
            options.append(text)
    order = g.permutation(len(options))
    options = tuple(options[i] for i in order)
    answer = options.index(_keys(ks, applied[row]))
    q = qs[row]
    empty = [qs[i] for i in np.flatnonzero(~applied.any(-1))]
    inverted = (
        f"Keras reads 1 as *may attend*, so the mask is inverted: {q} attends to {_keys(ks, applied[row])} — the "
        f"future it must not see — and not to itself. {', '.join(empty)} sees no key at all (attnviz gives that row "
        "zeros, Keras spreads it evenly, PyTorch's MultiheadAttention returns NaN)."
    )

    def convention_check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, f"Right. {inverted}"
        swap = (
            "Keras reads 1 as *may attend*: every cell written 1 (blocked) becomes allowed, every 0 blocked. "
            f"Read {q}'s row again with that swap."
        )
        if options[choice] == _keys(ks, allowed[row]):
            return False, f"That is what the mask *meant*. {swap}"
        return False, f"No. {swap}"

    return Exercise(
        step=step,
        key="masks",
        title="Masks",
        seed=seed,
        intro=(
            "A **mask** says which keys each query may use; a blocked score becomes −∞, so its weight is exactly 0. "
            "A **causal** mask (decoders, GPT) lets each token see only itself and earlier tokens. "
            "Careful: APIs disagree on what 1 means."
        ),
        given=f"A sentence of {n} tokens: queries {qs[0]}…{qs[-1]}, keys {ks[0]}…{ks[-1]}.",
        parts=(
            Part(
                "Pick, for each query, the keys a **causal** mask **blocks**.",
                CELLS,
                ~allowed,
                _cells_check(~allowed, qs, ks),
                "; ".join(
                    f"{q_}: {_keys(ks, b) if b.any() else 'none'}" for q_, b in zip(qs, ~allowed, strict=True)
                ),
                options=ks,
                rows=qs,
            ),
            Part(
                f"This causal mask is written the TensorFlow-tutorial way (`logits += mask * -1e9`, **1 = blocked**) "
                f"and passed to Keras's `MultiHeadAttention(attention_mask=…)`, where **1 = may attend**. "
                f"Which keys does **{q}** then attend to?",
                CHOICE,
                answer,
                convention_check,
                options[answer],
                options=options,
            ),
        ),
        hint="Causal: query i sees keys 1…i. For the second part, swap what 0 and 1 mean and read the row again.",
        explanation=(
            f"Blocked by the causal mask: every key after its query (the upper triangle). {inverted}"
        ),
        data={"allowed": allowed, "applied": applied, "q_labels": qs, "k_labels": ks},
        link=Link(
            "steps",
            "Open this in Step by step (the mask conventions)",
            app_config(len_q=n, mask="causal", seed=config_seed(seed, step, 0)),
            {"steps.built": BUILT, "steps.given": PASSED},
        ),
    )


def head_weights(cfg: dict) -> np.ndarray:
    """`(4, L, L)`: the four interpretable heads' weights for a configuration, as the explorer computes them."""
    spec = AttentionSpec(len_q=cfg["len_q"], d_model=cfg["d_model"], n_heads=4, seed=cfg["seed"])
    x_q, _ = make_inputs(spec)
    params, x_q, _ = heads.build(spec, x_q, x_q)
    return reference.multi_head_attention(spec, params, x_q, x_q)["softmax"][0]


def _shares(weights: np.ndarray) -> dict[str, float]:
    """Each pattern's mean share of a row (rows that have a target key), for one `(L, L)` map."""
    out = {}
    for pattern in heads.PATTERNS:
        target = heads.targets(pattern, *weights.shape)
        rows = target.any(1)
        out[pattern] = float((weights * target).sum(1)[rows].mean())
    return out


def _looks(shares: dict[str, float]) -> str:
    """The pattern a panel shows: a sharp one that holds ≥ 0.9 of each row, else the window
    (the window's keys include the previous, same and sometimes first token, so it is tested last)."""
    sharp = {p: v for p, v in shares.items() if p != "window"}
    best = max(sharp, key=sharp.get)
    return best if sharp[best] >= 0.9 else "window"


def heads_exercise(seed: int, step: int = 4) -> Exercise:
    """Which of four hand-built heads is the previous-token head?"""
    g = rng(seed, step)
    n = int(g.integers(6, 9))
    cfg = app_config(len_q=n, d_model=16, weights="interpretable", seed=config_seed(seed, step, 0))
    weights = head_weights(cfg)
    order = g.permutation(4)  # panel i shows head order[i]
    panels = weights[order]
    shares = [_shares(w) for w in panels]
    answer = int(np.argmax([s["previous token"] for s in shares]))
    looks = [_looks(s) for s in shares]

    def check(choice: int) -> tuple[bool, str]:
        s = shares[choice]
        if choice == answer:
            return True, (
                f"Right: panel {PANELS[choice]} puts {s['previous token']:.2f} of each row on the key just before "
                "the query — the bright cells sit one step left of the diagonal."
            )
        return False, (
            f"Panel {PANELS[choice]} is the **{looks[choice]}** head ({s[looks[choice]]:.2f} of each row there). "
            "Look for the panel whose row i is bright at column i − 1, just left of the diagonal."
        )

    labels = tuple(str(i) for i in range(n))
    return Exercise(
        step=step,
        key="heads",
        title="Heads",
        seed=seed,
        intro=(
            "A model has several **heads**, each with its own W_Q and W_K, so each can look for something else. "
            "Trained models learn a few recognisable ones; here four are built by hand (attnviz.heads): a "
            "previous-token head, a same-token head, a first-token head and a window head."
        ),
        given=f"Four heads on {n} tokens (rows: queries, columns: keys; darker = more weight), in shuffled order.",
        parts=(
            Part(
                "Which panel is the **previous-token** head (each token attends to the one before it)?",
                CHOICE,
                answer,
                check,
                PANELS[answer],
                options=PANELS,
            ),
        ),
        hint="Find the diagonal (query i, key i). The previous-token head is bright just beside it — on which side?",
        explanation=(
            "; ".join(f"panel {p}: {lk}" for p, lk in zip(PANELS, looks, strict=True))
            + f". The explorer draws these heads in order 0–3: panel {PANELS[answer]} is its head "
            f"{int(order[answer])}."
        ),
        data={"panels": panels, "patterns": tuple(looks), "labels": labels},
        link=Link("explorer", "Open this in the explorer", cfg),
        tables=tuple((f"Panel {p}", w, labels, labels) for p, w in zip(PANELS, panels, strict=True)),
    )


def _shape_check(answer: tuple[int, ...], wrongs: dict[tuple[int, ...], str]):
    def check(text) -> tuple[bool, str]:
        typed = parse_shape(text) if isinstance(text, str) else tuple(text)
        if typed is None:
            return False, "Type the sizes as numbers separated by commas, e.g. 2, 4, 8, 16."
        if typed == answer:
            return True, f"Right: {shape_text(answer)}."
        if typed in wrongs:
            return False, wrongs[typed]
        if sorted(typed) == sorted(answer):
            return False, "The right sizes in the wrong order: batch stays first; where do the heads go?"
        if len(typed) != len(answer):
            return False, f"This tensor has {len(answer)} axes; you typed {len(typed)}."
        return False, f"Not {shape_text(typed)}; count each axis again."

    return check


def shapes(seed: int, step: int = 5) -> Exercise:
    """The shape after split heads, after QKᵀ and after merging the heads."""
    g = rng(seed, step)
    while True:  # sizes that differ from each other, so every axis can be told apart
        B, L = int(g.integers(1, 4)), int(g.integers(5, 13))
        H, dk = int(g.choice([2, 4, 8])), int(g.choice([4, 8, 16]))
        if len({B, L, H, dk, H * dk}) == 5:
            break
    D = H * dk
    cfg = app_config(batch=B, len_q=L, d_model=D, n_heads=H, seed=config_seed(seed, step, 0))
    spec = AttentionSpec(batch=B, len_q=L, d_model=D, n_heads=H, seed=cfg["seed"])
    steps = reference.multi_head_attention(spec, init_params(spec), *make_inputs(spec))
    split, scores, merged = (tuple(steps[n].shape) for n in ("q_heads", "scores", "merged"))
    parts = (
        Part(
            "**Q after splitting the heads** (the shape the attention of every head runs on):",
            SHAPE,
            split,
            _shape_check(
                split,
                {
                    (
                        B,
                        L,
                        H,
                        dk,
                    ): "That is after the reshape, before the transpose: heads move in front of the "
                    "positions, so each head is a batch of its own.",
                    (B, L, D): "That is Q before the split: it is cut into H heads of d_k columns each.",
                },
            ),
            shape_text(split),
        ),
        Part(
            "**QKᵀ**, the scores:",
            SHAPE,
            scores,
            _shape_check(
                scores,
                {
                    (
                        B,
                        H,
                        L,
                        dk,
                    ): "That is Q's shape. QKᵀ multiplies (L, d_k) by (d_k, L): one score per query and "
                    "key, d_k is summed away.",
                    (
                        B,
                        H,
                        dk,
                        dk,
                    ): "QKᵀ is (L, d_k) @ (d_k, L): the d_k axis is summed away, positions remain.",
                },
            ),
            shape_text(scores),
        ),
        Part(
            "**After merging the heads** (before W_O):",
            SHAPE,
            merged,
            _shape_check(
                merged,
                {
                    (
                        B,
                        H,
                        L,
                        dk,
                    ): "That is the heads' context, still split. Merging moves the heads back behind "
                    "the positions and joins them into one axis of H · d_v features.",
                    (
                        B,
                        L,
                        H,
                        dk,
                    ): "Transposed back, but not yet joined: the last two axes become one of H · d_v.",
                },
            ),
            shape_text(merged),
        ),
    )
    ledger = {
        n: tuple(steps[n].shape) for n in ("q_proj", "q_heads", "scores", "softmax", "context", "merged")
    }
    return Exercise(
        step=step,
        key="shapes",
        title="Shapes",
        seed=seed,
        intro=(
            "Multi-head attention is mostly bookkeeping: Q, K and V are cut into H heads of width d_k, every head "
            "runs attention on its own, and the heads are joined again. Shapes are written (batch, …)."
        ),
        given=f"Input x: **{shape_text((B, L, D))}** = (batch B = {B}, length L = {L}, d_model = {D}); "
        f"**H = {H}** heads, so d_k = d_v = {D} / {H} = **{dk}**.",
        parts=parts,
        hint="Each head is handled like an extra batch axis: (B, H, L, d_k). Scores pair every query with every key.",
        explanation="The reference records: "
        + "; ".join(f"{n} {shape_text(s)}" for n, s in ledger.items())
        + ". The explorer's shape table lists every step.",
        data={"ledger": ledger},
        link=Link("explorer", "Open this in the explorer (its shape table)", cfg),
    )
