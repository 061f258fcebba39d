"""Step 8: a learned head — which token does "it" attend to in a head of MiniLM?

The packaged all-MiniLM-L6-v2 (a 6-layer BERT-family encoder, 12 heads) runs
through `attnviz.pretrained`, whose every attention is attnviz's own. The
seed picks a sentence and a head whose "it" row has a clear winner (at least
`CLEAR` of the row) among the sentence's words — not [CLS], [SEP] or "it"
itself, when such a head exists — and three other tokens as the other options.
"""

from __future__ import annotations

import functools

import numpy as np

from attnviz import pretrained
from attnviz.frameworks import installed
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, rng

CHECKPOINT = "all-MiniLM-L6-v2"
# Each sentence with the word "it" refers to (for the explanation only; the answer is the model's).
SENTENCES = (
    ("The animal did not cross the street because it was too tired.", "animal"),
    ("The trophy did not fit in the suitcase because it was too big.", "trophy"),
    ("The cat sat on the mat because it was warm.", "cat"),
    ("The dog chased the ball until it stopped rolling.", "ball"),
    ("My phone fell in the water, so it stopped working.", "phone"),
    ("The city built a bridge because it needed a shorter road.", "city"),
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


def _why(tokens: list[str], it: int, target: int, referent: str) -> str:
    if tokens[target] == referent:
        return (
            f"This head links “{WORD}” to “{referent}”, the word it refers to here: trained models learn heads "
            "that follow such references (Clark et al., 2019, found them in BERT)."
        )
    if tokens[target] in SPECIAL:
        return (
            f"This head parks “{WORD}” on {SPECIAL[tokens[target]]}: many BERT heads do that when their pattern "
            "does not apply (Clark et al., 2019)."
        )
    if target == it - 1:
        return f"“{WORD}” looks at the word just before it, as a previous-token head does for every token."
    if target == it + 1:
        return f"“{WORD}” looks at the word just after it, as a next-token head does for every token."
    if target == it:
        return f"This head keeps “{WORD}” on itself."
    return f"This head links “{WORD}” to “{tokens[target]}”, {abs(target - it)} tokens away."


def learned(seed: int, step: int = 7) -> Exercise:
    """Which token does "it" attend to most in one head of MiniLM?"""
    g = rng(seed, step)
    sentence, referent = SENTENCES[int(g.integers(len(SENTENCES)))]
    tokens, attn = attention(sentence)
    it = tokens.index(WORD)
    rows = attn[:, :, it, :]  # (layers, heads, T): what "it" attends to
    words = np.array([t not in SPECIAL and i != it for i, t in enumerate(tokens)])
    clear = np.argwhere((rows.max(-1) >= CLEAR) & words[rows.argmax(-1)])
    if not len(clear):
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
            return True, f"Right: {top}. {_why(tokens, it, target, referent)}"
        return False, (
            f"{options[choice]} gets {row[picks[choice]]:.2f} of “{WORD}”'s attention in this head; another "
            "option gets more. Heads often look at a neighbour, at [CLS] or [SEP], or at a related word."
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
        hint=f"Which words stand next to “{WORD}”, and which word does “{WORD}” stand for? Pick one and check.",
        explanation=f"“{WORD}” attends most to {top}. {_why(tokens, it, target, referent)}",
        data={"attn": attn[layer], "tokens": tokens, "head": head, "focus": it},
        link=Link(
            "pretrained",
            "Open this on the Pretrained model page",
            {},
            {
                "pre.checkpoint": CHECKPOINT,
                "pre.text": sentence,
                "pre.layer": str(layer),
                "pre.tab": "Head view",
                "pre.view_heads": str(head),
            },
        ),
    )
