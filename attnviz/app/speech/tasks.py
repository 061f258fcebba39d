"""The Speech page's heavy work as a task, run in a worker like every screen's `tasks.py` (a WAV's bytes
in, plain arrays out): the clip read and resampled, the log-mel spectrogram, the transcription with
every cross-attention row, and — on request — the encoder's self-attention, each cut to the clip's
own frames so what travels back is small (a 5-s clip: ~2 MB, not the 30-s window's 36 MB)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnviz.audio import HOP, log_mel, read_wav
from attnviz.exec.monitor import Monitor, watch
from attnviz.pretrained.speech import Transcript
from attnviz.pretrained.tasks import checkpoint


@dataclass(frozen=True)
class Heard:
    """A transcribed clip, cut to its own length.

    Attributes:
        transcript: `Transcript` with `cross_attentions (L, H, T, P)` and, when asked,
            `encoder_attentions (L, H, P, P)` over the clip's P audio positions (20 ms each).
        mel: `(80, 2P)` the clip's log-mel spectrogram (10 ms frames).
        seconds: the clip's length as read; kept: the seconds transcribed (at most 30).
        rate, channels: the file's.
    """

    transcript: Transcript
    mel: np.ndarray
    seconds: float
    kept: float
    rate: int
    channels: int


def transcribe(
    source: str,
    wav: bytes,
    framework: str = "torch",
    encoder: bool = False,
    *,
    monitor: Monitor | None = None,
) -> Heard:
    """`SpeechCheckpoint.transcribe` on a WAV file's bytes (`attnviz.audio.read_wav` checks them)."""
    audio, monitor = read_wav(wav), watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    P = max(1, -(-len(audio.samples) // (2 * HOP)))  # audio positions that hold the clip
    monitor.report(0, 1)
    t = ckpt.transcribe(audio, framework=framework, encoder_attentions=P if encoder else 0)
    t = dataclasses.replace(
        t, cross_attentions=np.ascontiguousarray(t.cross_attentions[..., :P])
    )  # (L, H, T, P)
    return Heard(t, log_mel(audio)[:, : 2 * P], audio.seconds, audio.kept_seconds, audio.rate, audio.channels)
