"""Interpretability on attnviz's own models: what heads do, not only where they look.

`roles` scores every head of a model for a role (previous token, induction, duplicate token,
first token) on repeated random tokens; `patching` measures how much of a clean − corrupted
logit difference each head's output restores; `attribution_patching` estimates the same from
one backward pass (`attribution`) and says how far the estimate follows the exact map
(`agreement`); `lens` reads the residual stream through the final norm and unembedding; `dla`
splits a logit difference into each head's direct contribution (`direct_logit_attribution`); `qkov` reads a head's QK and OV circuits and how
heads compose; `score_table` takes one head's pre-softmax score (`score_parts`) or a whole row
(`score_row`) apart into exact (query part × key part) terms. Everything works on any `attnviz.pretrained.Checkpoint` decoder
(GPT-2 family, Llama family, Training-lab checkpoints; `dla` and `qkov`: GPT-2 and Llama) in
either framework.
"""

from attnviz.interp.attribution_patching import agreement, attribution
from attnviz.interp.dla import direct_logit_attribution
from attnviz.interp.score_table import score_parts, score_row

__all__ = ["agreement", "attribution", "direct_logit_attribution", "score_parts", "score_row"]
