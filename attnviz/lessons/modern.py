"""Modern attention on real weights: sliding windows, RoPE in SmolLM2, FlashAttention's tiles, the logit lens.

- `window`: which keys a query sees under a causal window of W (Mistral, Gemma 3's local layers), and
  how far back information travels through several such layers — the weights of the explorer's run.
- `rope`: SmolLM2's own query and key (before RoPE) turned at other positions (Su et al., 2021): the
  score depends only on the offset.
- `tiles`: how many tiles FlashAttention (Dao et al., 2022) computes for a real head, with and without
  the causal mask — counted from `attnviz.kernels.tiled_attention`'s record.

The lesson's logit-lens step is `attnviz.lessons.lens`.
"""

from __future__ import annotations

import numpy as np

from attnviz import reference
from attnviz.kernels import tiled_attention
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CELLS, CHOICE, NUMBERS, Exercise, Link, Part, app_config, config_seed, rng
from attnviz.params import init_params, make_inputs
from attnviz.spec import AttentionSpec

LESSON = "modern"
SPAN = 24  # positions the RoPE figure draws


# -- a sliding window ------------------------------------------------------------------------------


def window_weights(cfg: dict) -> np.ndarray:
    """`(L, L)`: the weights of the explorer's one-head run of `cfg` (a causal window), float64."""
    spec = AttentionSpec(
        len_q=cfg["len_q"], d_model=cfg["d_model"], n_heads=1, bias=False, dtype="float64", seed=cfg["seed"],
        mask="causal", window=cfg["window"],
    )  # fmt: skip
    x_q, x_kv = make_inputs(spec)
    return reference.multi_head_attention(spec, init_params(spec), x_q, x_kv)["softmax"][0, 0]


def reach(visible: np.ndarray, layers: int) -> np.ndarray:
    """`(L, L)` bool: which tokens' information can reach which position after `layers` layers of the
    one-layer visibility `visible (L, L)` (what a key read one layer down travels with it)."""
    out = visible.copy()
    for _ in range(layers - 1):
        out = (out.astype(np.int64) @ visible.astype(np.int64)) > 0
    return out


def window(seed: int, step: int = 2) -> Exercise:
    """Which keys does query i see under a causal window of W; after n such layers, does token 0 reach it?"""
    g = rng(seed, step, LESSON)
    L, W = int(g.integers(8, 13)), int(g.integers(2, 5))
    i, n = int(g.integers(W + 1, L)), int(g.integers(2, 5))
    cfg = app_config(
        len_q=L, d_model=8, n_heads=1, bias=False, dtype="float64", mask="causal", window=W,
        seed=config_seed(seed, step, 0),
    )  # fmt: skip
    weights = window_weights(cfg)
    visible = weights > 0  # a blocked key's weight is exactly 0
    heard = reach(visible, n)
    keys = tuple(str(j) for j in range(L))
    seen = tuple(int(j) for j in np.flatnonzero(visible[i]))
    seen_text = ", ".join(map(str, seen))

    def cells(picked) -> tuple[bool, str]:
        chosen = set(np.flatnonzero(np.asarray(picked, bool).reshape(-1)).tolist())
        if chosen == set(seen):
            return True, (
                f"Right: a window of {W} keeps key j when i − {W} < j ≤ i: query {i} sees itself and the "
                f"{W - 1} key{'s' if W > 2 else ''} before it."
            )
        if chosen == set(range(i + 1)):
            return False, f"That is the plain causal mask. The window keeps only the last {W} of those keys."
        if any(j > i for j in chosen):
            return False, "A causal window never shows a later key: nothing after the query."
        if i not in chosen:
            return False, "A token may attend to itself: the window counts the query's own position."
        return False, f"Count again: the window holds {W} keys, ending at the query's own position."

    yes = f"Yes: token 0's information reaches query {i}"
    no = f"No: token 0 is out of query {i}'s reach"
    options = (yes, no)
    answer = 0 if heard[i, 0] else 1
    hops = f"{W - 1} × {n} = {(W - 1) * n}"

    def carried(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right: each layer lets a token read {W - 1} positions back, and what it reads already carries "
                f"what those tokens read one layer down: {n} layers reach back {hops} positions, to token "
                f"{max(0, i - (W - 1) * n)}."
            )
        return False, (
            "A window hides far keys from one layer, not from the model: what a key read in the layer before "
            "travels with it. How far back does each layer reach, and how many layers are there?"
        )

    return Exercise(
        step=step,
        key="window",
        title="Sliding windows",
        seed=seed,
        intro=(
            "A **sliding window** caps how far back a query looks: with a window of W, query i attends only to keys "
            "i − W + 1 … i. Mistral and Gemma 3's local layers use one, so a layer's work and cache stop growing "
            "with the text. Does the model then forget the start?"
        ),
        given=(
            f"{L} tokens, positions 0 … {L - 1}; a **causal window of W = {W}**. The model stacks **{n} layers** "
            "with this window."
        ),
        parts=(
            Part(
                f"Which keys can **query {i}** see?",
                CELLS,
                visible[i][None],
                cells,
                seen_text,
                options=keys,
                rows=(f"query {i}",),
                row_label="{row} can see",
            ),
            Part(
                f"After {n} such layers, can information from **token 0** reach position {i}?",
                CHOICE,
                answer,
                carried,
                options[answer],
                options=options,
            ),
        ),
        hint="Write i − W < j ≤ i out for this query. For the layers: how far back does one layer reach?",
        explanation=(
            f"Query {i} sees keys **{seen_text}** (i − {W} < j ≤ i); the explorer's weights are 0 everywhere else. "
            f"Through {n} layers, information travels {hops} positions back: "
            f"{'token 0 reaches it' if heard[i, 0] else 'token 0 does not reach it'} "
            f"(the second figure: after {n} layers, who can have heard of whom)."
        ),
        data={"weights": weights, "visible": visible, "reach": heard, "layers": n, "query": i, "window": W},
        link=Link("explorer", "Open this in the explorer", cfg),
        lesson=LESSON,
    )


# -- RoPE on SmolLM2's own q and k ---------------------------------------------------------------------


def rope_scores(q: np.ndarray, k: np.ndarray, base: float, query_at, key_at) -> np.ndarray:
    """q·k with q turned as at each of `query_at` and k as at the matching `key_at` (RoPE)."""
    return np.array(
        [
            checkpoints.turned(q, int(m), base) @ checkpoints.turned(k, int(n), base)
            for m, n in zip(query_at, key_at, strict=True)
        ]
    )


def rope(seed: int, step: int = 3, *, ckpt=None) -> Exercise:
    """Does RoPE's q·k depend on where the two tokens are, or only on how far apart?"""
    ckpt = ckpt or checkpoints.load()
    base = checkpoints.rope_base(ckpt)
    g = rng(seed, step, LESSON)
    text, layer, cap = checkpoints.pooled(ckpt, int(g.integers(checkpoints.POOL)))
    H, T = cap.q.shape[:2]
    head = int(g.integers(H))
    kv = next(j for j in range(cap.k.shape[0]) if np.array_equal(cap.k_repeated[head], cap.k_rope[j]))
    m = int(g.integers(2, min(T, SPAN - 2)))  # the figure spans offset m − n + 1
    n, shift = int(g.integers(0, m)), int(g.integers(3, 40))
    q, k = cap.q[head, m], cap.k[kv, n]  # before RoPE
    gap = m - n
    here = float(cap.q_rope[head, m] @ cap.k_rope[kv, n])  # the model's own turned q and k
    moved = float(rope_scores(q, k, base, [m + shift], [n + shift])[0])
    along = rope_scores(q, k, base, np.arange(SPAN) + gap, np.arange(SPAN))  # one offset, every start
    apart = rope_scores(q, k, base, n + np.arange(SPAN), [n] * SPAN)  # one key, every offset
    size = max(float(np.abs(apart).max()), 1e-12)
    options = (
        "Only how far apart they are (m − n)",
        "Where they are (m and n themselves)",
        "Neither: RoPE leaves q·k as it was",
    )
    shift_free, offset_matters = np.ptp(along) < 1e-9 * size, np.ptp(apart) > 1e-6 * size
    answer = 0 if shift_free and offset_matters else 1 if not shift_free else 2
    # The student is shown q·k to 2 decimals and the key is that number as shown: moving both tokens
    # changes it by float error only, which must not flip its second decimal.
    key = round(here, 2) if shift_free else round(moved, 2)
    numbers = (
        f"at ({m}, {n}) q·k = {here:.2f}; both moved {shift} places, at ({m + shift}, {n + shift}), "
        f"{key:.2f}; one place farther apart, at ({m + 1}, {n}), {apart[gap + 1]:.2f}"
    )
    tolerance = 0.01 + 0.005 * abs(key)

    def which(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right: {numbers}. RoPE turns q by m·θ and k by n·θ in each pair of features; a dot product of "
                "two turned vectors sees only the angle between them, (m − n)·θ."
            )
        if choice == 1:
            return False, (
                "Moving both tokens turns q and k by the same extra angle. Does a dot product change when both "
                "vectors turn together?"
            )
        return (
            False,
            "RoPE does change q·k: q is turned by m·θ and k by n·θ. Which of m and n does that depend on?",
        )

    def number(typed) -> tuple[bool, str]:
        value = float(typed[0])
        if abs(value - key) <= tolerance:
            return True, f"Right: {key:.2f} (within ±{tolerance:.2f}); the offset is still {gap}."
        return False, (
            f"Not {value:.2f}. Moving both by {shift} turns q by an extra {shift}·θ in each pair, and k too. "
            "Does the angle between them change?"
        )

    return Exercise(
        step=step,
        key="rope",
        title="RoPE in SmolLM2",
        seed=seed,
        intro=(
            "SmolLM2 and Gemma add no position vector to their tokens. **RoPE** turns each query and key instead, "
            "by an angle proportional to its position, in every pair of features, before the dot product. Here "
            "are a real query and key of SmolLM2, taken before they are turned."
        ),
        given=(
            f"**{ckpt.name}**, layer **{layer}**, head **{head}** (it reads K/V head {kv}) on *{text}*: the "
            f"query of token {m} (“{cap.tokens[m]}”) and the key of token {n} (“{cap.tokens[n]}”). Turned at "
            f"their positions, **q·k = {here:.2f}**. Now take the same two vectors {shift} positions later, "
            f"at {m + shift} and {n + shift}."
        ),
        parts=(
            Part(
                "With RoPE, the q·k of two tokens depends on…",
                CHOICE,
                answer,
                which,
                options[answer],
                options,
            ),
            Part(
                f"Type q·k at positions ({m + shift}, {n + shift}) to 2 decimals.",
                NUMBERS,
                (key,),
                number,
                f"{key:.2f}",
                options=("q·k",),
                bounds=(-1e6, 1e6),
            ),
        ),
        hint="Turn two arrows by the same angle. Does the angle between them change?",
        explanation=(
            f"{numbers}. For every start, at offset {gap} the score stays {here:.2f} (the flat line); at a fixed "
            f"start it changes with the offset, between {apart.min():.2f} and {apart.max():.2f} over {SPAN} offsets."
        ),
        data={
            "along": along,
            "apart": apart,
            "gap": gap,
            "q": q,
            "q_turned": checkpoints.turned(q, m, base),
            "position": m,
        },
        link=Link(
            "pretrained",
            "Open this on the Pretrained model page",
            {},
            {"pre.checkpoint": ckpt.name, "pre.text": text, "pre.layer": str(layer)},
        ),
        lesson=LESSON,
    )


# -- FlashAttention's tiles -----------------------------------------------------------------------------


def computed(result) -> int:
    """Tiles a tiled pass computed (`TiledAttention.tiles` less the skipped ones)."""
    return sum(not t.skipped for t in result.tiles)


def cut(result) -> int:
    """Tiles the causal diagonal cuts: computed, with some scores set to −∞ inside."""
    return sum(t.scores is not None and bool(np.isneginf(t.scores).any()) for t in result.tiles)


def tiles(seed: int, step: int = 4, *, ckpt=None) -> Exercise:
    """How many tiles does FlashAttention compute for T tokens in bq × bk blocks, without and with the mask?"""
    ckpt = ckpt or checkpoints.load()
    g = rng(seed, step, LESSON)
    text, layer, cap = checkpoints.pooled(ckpt, int(g.integers(checkpoints.POOL)))
    head = int(g.integers(cap.q.shape[0]))
    T = len(cap.tokens)
    bq, bk = (int(b) for b in g.integers(2, 6, size=2))
    q, k, v = (x[head][None, None] for x in (cap.q_rope, cap.k_repeated, cap.v_repeated))  # (1, 1, T, d)
    runs = {causal: tiled_attention(q, k, v, block_q=bq, block_k=bk, causal=causal,
                                    framework=checkpoints.framework()) for causal in (False, True)}  # fmt: skip
    full, masked, diagonal = computed(runs[False]), computed(runs[True]), cut(runs[True])
    blocks = (-(-T // bq), -(-T // bk))
    fields = ("tiles without a mask", "tiles with the causal mask")
    worked = (
        f"⌈{T} / {bq}⌉ = {blocks[0]} query blocks × ⌈{T} / {bk}⌉ = {blocks[1]} key blocks = {full} tiles; with "
        f"the mask {full - masked} of them lie wholly above the diagonal and are skipped, leaving {masked} "
        f"({diagonal} of those cut by the diagonal, masked inside)"
    )

    def count(typed) -> tuple[bool, str]:
        a, b = (round(float(x)) for x in typed)
        notes = []
        if a != full:
            floor = (T // bq) * (T // bk)
            notes.append(
                f"{fields[0]}: a last, shorter block is still a block: round T / b up."
                if a == floor
                else f"{fields[0]}: count the query blocks and the key blocks; every pair of them is a tile."
            )
        if b != masked:
            if b == full:
                why = "the mask lets the pass skip every tile whose keys all come after its queries."
            elif b == masked - diagonal:
                why = "the tiles the diagonal cuts are computed too, with −∞ above the diagonal inside them."
            elif b == round(full / 2):
                why = "not half: the tiles on the diagonal are computed too."
            else:
                why = (
                    "a tile is skipped only when its first key comes after its last query; count the others."
                )
            notes.append(f"{fields[1]}: {why}")
        return (not notes, f"Right: {worked}." if not notes else " ".join(notes))

    skip = "A tile whose keys all come after its queries would hold only masked scores: the pass skips it"
    options = (
        skip,
        "The mask makes every tile smaller, so fewer tiles are needed",
        "Masked scores are zero, so those tiles are added up faster",
        "It does not skip any: the pass computes every tile and throws some away",
    )
    answer = 0 if masked < full else 3
    wrong = {
        1: "The tiles keep their size, bq × bk; what changes is which of them the pass runs.",
        2: "A masked score becomes −∞ before the softmax, but computing it would cost the same.",
        3: "Count with the mask: some tiles hold only keys after all of their queries. Does the pass need them?",
        0: "Here every tile holds some key before its queries: nothing can be skipped.",
    }

    def why(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                "Right: under the causal mask query i may use keys 0 … i; a tile whose first key comes after "
                "its last query would be all −∞, so FlashAttention never loads it."
            )
        return False, wrong[choice]

    return Exercise(
        step=step,
        key="tiles",
        title="FlashAttention's tiles",
        seed=seed,
        intro=(
            "FlashAttention never forms the whole T × T score matrix. It cuts the queries into blocks of bq and "
            "the keys into blocks of bk and computes one **tile** (bq × bk scores) at a time, keeping a running "
            "max and sum per row: the result is exact, the memory small. How much work does the causal mask save?"
        ),
        given=(
            f"**{ckpt.name}**, layer {layer}, head {head} on *{text}*: **T = {T} tokens**, query blocks of "
            f"**bq = {bq}**, key blocks of **bk = {bk}** (the last block of each may be shorter)."
        ),
        parts=(
            Part(
                "How many tiles does the pass compute?",
                NUMBERS,
                (float(full), float(masked)),
                count,
                f"{full}, {masked}",
                options=fields,
                bounds=(0.0, 1e5),
                decimals=0,
            ),
            Part("Why fewer with the causal mask?", CHOICE, answer, why, options[answer], options),
        ),
        hint="Blocks per axis: ⌈T / b⌉. With the mask, which tiles contain no key at or before any of their queries?",
        explanation=f"{worked}. The figures show the pass's grid: grey cells were computed, dark tiles skipped.",
        data={"runs": runs, "tokens": cap.tokens},
        link=Link(
            "tiles",
            "Open this on the FlashAttention page",
            {},
            {
                "tiles.checkpoint": ckpt.name,
                "tiles.text": text,
                "tiles.layer": str(layer),
                "tiles.head": str(head),
                "tiles.bq": str(bq),
                "tiles.bk": str(bk),
            },
        ),
        lesson=LESSON,
    )
