"""Interpretability on attnviz's own models: what heads do, not only where they look.

`roles` scores every head of a model for a role (previous token, induction, duplicate token,
first token) on repeated random tokens; `patching` measures how much of a clean − corrupted
logit difference each head's output restores; `lens` reads the residual stream through the
final norm and unembedding. Everything works on any `attnviz.pretrained.Checkpoint` decoder
(GPT-2 family, Llama family, Training-lab checkpoints) in either framework.
"""
