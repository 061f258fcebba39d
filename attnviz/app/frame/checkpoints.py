"""What a visitor may open on the Pretrained and Interpretability pages: the server's checkpoints and
this session's own saved Training-lab runs (visible to that session only)."""

from __future__ import annotations

import contextlib
import os

from attnviz import exec as ex
from attnviz import pretrained, training
from attnviz.app.frame import door, results
from attnviz.app.frame.session import session_id
from attnviz.pretrained import gguf, tasks


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
    """The card of a checkpoint (configuration and tokenizer; its weights stay in the workers that
    compute) by a name from `pretrained.choices()` (or a Hub id when the operator allows the Hub), or
    by the folder of one of this session's saved runs — never any other path."""
    if source in {str(folder) for folder in saved_here().values()}:
        return pretrained.load(source, weights=False)
    _card_files(source)
    return pretrained.load_choice(source, weights=False)


def _card_files(name: str) -> None:
    """A packaged GGUF file's card (configuration, tokenizer) converted in a worker the first time it
    is opened on this machine: reading Gemma 3's 262,144-token vocabulary from the file took the
    server over 1 GB and a minute; the server then reads the converted `tokenizer.json` alone."""
    path = pretrained.local_checkpoints().get(name)
    if path is None or path.suffix != gguf.GGUF_SUFFIX:
        return
    if gguf.is_converted(pretrained.packaged_path(name, path), weights=False):
        return
    # No worker could do it (a TaskError): this process converts the card, as a library user's does.
    with contextlib.suppress(ex.TaskError):
        door.run(
            tasks.card_files,
            name,
            spinner=f"Preparing {name}'s tokenizer and configuration (once on this machine)",
        )


@results.bounded("checkpoint kinds", ttl=600)
def kind(source: str) -> str:
    """'decoder' or 'encoder', read once per server (a cached string, not the checkpoint)."""
    return open_checkpoint(source).kind


def decoder_choices(first: str | None = None) -> dict[str, str]:
    """`checkpoint_choices` that generate (decoders, this session's causal Training-lab runs), `first`
    leading when it is among them. A checkpoint that cannot be read is left out (the Pretrained page
    names why)."""

    def decodes(source: str) -> bool:
        try:
            return kind(source) == "decoder"
        except ValueError:
            return False

    found = {label: source for label, source in checkpoint_choices().items() if decodes(source)}
    return ({first: found.pop(first)} if first in found else {}) | found


def task_source(label: str, source: str) -> str:
    """How a worker opens a checkpoint this visitor picked: a packaged one by its name; any other the
    server has allowed (a folder under `ATTNVIZ_CHECKPOINTS`, a Hub download, a saved run) by its
    absolute folder, which a worker started before the operator's setting changed still finds."""
    if label in pretrained.PACKAGED or os.path.isabs(source):
        return source
    return str(open_checkpoint(source).path)


def architecture(config, *, window: int | None = None) -> str:
    """What the model is, in one line: layers × query heads, the K/V heads they share (GQA, MQA),
    how it knows positions, and — for Gemma 3 — QK-norm and its local and global layers (their
    window `window` where a page narrowed it, named as narrowed from the model's own).

    "30 layers × 9 query heads on 3 shared K/V heads (GQA) · RoPE"; "12 layers × 12 heads".
    """
    L, H = config.num_hidden_layers, config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", H)
    heads = f"{L} layer{'s' * (L != 1)} × {H} head{'s' * (H != 1)}"
    if kv < H:
        kind = "MQA" if kv == 1 else "GQA"
        heads = f"{L} layers × {H} query heads on {kv} shared K/V head{'s' * (kv != 1)} ({kind})"
    parts = [heads]
    if hasattr(config, "rope_theta") or hasattr(config, "rope_local"):
        parts.append("RoPE")
    elif config.model_type in ("gpt2", "bert"):
        parts.append("learned positions")
    is_local = getattr(config, "is_local", None)
    if is_local is not None:
        parts.append("QK-norm")
        local = [i for i in range(L) if is_local(i)]
        globals_ = [str(i) for i in range(L) if not is_local(i)]
        parts.append(
            f"{len(local)} local layers ("
            + (
                f"{window}-token window, narrowed from {config.sliding_window}"
                if window
                else f"{config.sliding_window}-token window"
            )
            + "), "
            f"{len(globals_)} global ({', '.join(globals_)})"
        )
    return " · ".join(parts)
