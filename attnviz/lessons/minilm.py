"""Step 8: a learned head — which token does "it" attend to in a head of MiniLM?

The packaged all-MiniLM-L6-v2 (a 6-layer BERT-family encoder, 12 heads) runs
through `attnviz.pretrained`, whose every attention is attnviz's own. The
seed picks a sentence and a head whose "it" row has a clear winner (at least
`CLEAR` of the row), and three other tokens as the other options.
"""

from __future__ import annotations

import functools

import numpy as np

from attnviz import pretrained
from attnviz.frameworks import installed
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, rng

CHECKPOINT = "all-MiniLM-L6-v2"
SENTENCES = (
    "The animal did not cross the street because it was too tired.",
    "The trophy did not fit in the suitcase because it was too big.",
    "The cat sat on the mat because it was warm.",
    "The dog chased the ball until it stopped rolling.",
    "My phone fell in the water, so it stopped working.",
    "The city built a bridge because it needed a shorter road.",
)
WORD = "it"
CLEAR = 0.4  # the winner's share of the row
SPECIAL = {"[CLS]": "the start token [CLS]", "[SEP]": "the end token [SEP]"}


@functools.lru_cache(maxsize=len(SENTENCES))
def attention(sentence: str) -> tuple[list[str], np.ndarray]:
    """The sentence's tokens and `(layers, heads, T, T)` attention in MiniLM (the first installed framework)."""
    out = pretrained.load(CHECKPOINT).run(sentence, installed()[0])
    return list(out.tokens), np.asarray(out.attentions, dtype=np.float64)


def _name(tokens: list[str], i: int) -> str:
    tok = tokens[i]
    return f"“{tok}” (token {i})" if tokens.count(tok) > 1 else f"“{tok}”"


def _why(tokens: list[str], it: int, target: int) -> str:
    if tokens[target] in SPECIAL:
        return (
            f"This head parks “{WORD}” on {SPECIAL[tokens[target]]}: many BERT heads do that when their pattern "
            "does not apply (Clark et al., 2019)."
        )
    if target == it - 1:
        return "This is a previous-token head: each token looks at the one just before it."
    if target == it + 1:
        return "This head looks one token ahead: each token attends to the next one."
    if target == it:
        return f"This head keeps “{WORD}” on itself."
    return f"This head links “{WORD}” to “{tokens[target]}”, {abs(target - it)} tokens away."


def learned(seed: int, step: int = 7) -> Exercise:
    """Which token does "it" attend to most in one head of MiniLM?"""
    g = rng(seed, step)
    sentence = SENTENCES[int(g.integers(len(SENTENCES)))]
    tokens, attn = attention(sentence)
    it = tokens.index(WORD)
    rows = attn[:, :, it, :]  # (layers, heads, T): what "it" attends to
    clear = np.argwhere(rows.max(-1) >= CLEAR)
    layer, head = (int(v) for v in clear[int(g.integers(len(clear)))])
    row = rows[layer, head]
    target = int(row.argmax())
    others = [i for i in range(len(tokens)) if i != target]
    picks = sorted([target, *(int(i) for i in g.choice(others, size=3, replace=False))])
    options = tuple(_name(tokens, i) for i in picks)
    answer = picks.index(target)
    top = ", ".join(f"{_name(tokens, int(i))} {row[i]:.2f}" for i in np.argsort(row)[::-1][:3])

    def check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, f"Right: {top}. {_why(tokens, it, target)}"
        return False, (
            f"{options[choice]} gets {row[picks[choice]]:.2f} of “{WORD}”'s attention; the most goes to {top}. "
            + _why(tokens, it, target)
        )

    return Exercise(
        step=step,
        key="learned",
        title="A learned head",
        seed=seed,
        intro=(
            "Hand-built heads are neat; what does a **trained** model do? MiniLM (all-MiniLM-L6-v2, 6 layers × 12 "
            "heads, a sentence encoder) runs here with every attention computed by attnviz. Heads of trained "
            "models specialise — and many do something you would not guess."
        ),
        given=f"The sentence: *{sentence}*  \nLayer **{layer}**, head **{head}** (counting from 0).",
        parts=(
            Part(
                f"In layer {layer}, head {head}, which token does **“{WORD}”** attend to most?",
                CHOICE,
                answer,
                check,
                options[answer],
                options=options,
            ),
        ),
        hint="Heads often look at a neighbour, at [CLS] or [SEP], or at a related word. Guess, then check.",
        explanation=f"“{WORD}” attends most to {top}. {_why(tokens, it, target)}",
        data={"attn": attn[layer], "tokens": tokens, "head": head, "focus": it},
        link=Link(
            "pages/pretrained.py",
            "Open this on the Pretrained model page",
            {},
            {
                "pre.checkpoint": CHECKPOINT,
                "pre.text": sentence,
                "pre.layer": str(layer),
                "pre.tab": "Head view",
            },
        ),
    )
