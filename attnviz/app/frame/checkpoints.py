"""What a visitor may open on the Pretrained and Interpretability pages: the server's checkpoints and
this session's own saved Training-lab runs (visible to that session only)."""

from __future__ import annotations

from attnviz import pretrained, training
from attnviz.app.frame.session import session_id


def saved_here() -> dict:
    """This session's saved Training-lab runs (name → folder)."""
    return training.session_checkpoints(session_id() or "local")


def checkpoint_choices() -> dict[str, str]:
    """What this visitor may open, label → source: the server's checkpoints (label = source = name), then
    this session's own saved Training-lab runs (their saved name, e.g. "induction · PyTorch · 14:56:48" →
    its folder). Links carry the label, never a server path."""
    mine = {name: str(folder) for name, folder in saved_here().items()}
    return {**{name: name for name in pretrained.choices()}, **mine}


def open_checkpoint(source: str):
    """A checkpoint by a name from `pretrained.choices()` (or a Hub id when the operator allows the Hub), or
    by the folder of one of this session's saved runs — never any other path."""
    if source in {str(folder) for folder in saved_here().values()}:
        return pretrained.load(source)
    return pretrained.load_choice(source)
