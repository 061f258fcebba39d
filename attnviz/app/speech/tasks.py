"""The Speech page's heavy work as a task, run in a worker like every screen's `tasks.py` (a WAV's bytes
in, plain arrays out): the clip read and resampled, the log-mel spectrogram, the transcription with
every cross-attention row, and — on request — the encoder's self-attention, each cut to the clip's
own frames so what travels back is small (a 5-s clip: ~2 MB, not the 30-s window's 36 MB)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from attnviz.audio import HOP, log_mel, read_wav
from attnviz.cache import MIB
from attnviz.exec.limits import Limits
from attnviz.exec.monitor import Monitor, watch
from attnviz.pretrained import budget
from attnviz.pretrained.speech import Transcript
from attnviz.pretrained.tasks import checkpoint

PER_SECOND = 50  # audio positions a second (20 ms each)


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
    device: str = "cpu",
    monitor: Monitor | None = None,
) -> Heard:
    """`SpeechCheckpoint.transcribe` on a WAV file's bytes (`attnviz.audio.read_wav` checks them), on `device`."""
    audio, monitor = read_wav(wav), watch(monitor)
    ckpt = checkpoint(source, framework, monitor=monitor)
    P = max(1, -(-len(audio.samples) // (2 * HOP)))  # audio positions that hold the clip
    check_memory(ckpt.config, P if encoder else 0)
    monitor.report(0, 1)
    t = ckpt.transcribe(audio, framework=framework, encoder_attentions=P if encoder else 0, device=device)
    t = dataclasses.replace(
        t, cross_attentions=np.ascontiguousarray(t.cross_attentions[..., :P])
    )  # (L, H, T, P)
    return Heard(t, log_mel(audio)[:, : 2 * P], audio.seconds, audio.kept_seconds, audio.rate, audio.channels)


HEADROOM = 0.8  # the share of the worker's budget an estimate may take (see `memory_budget`)


def memory_budget() -> int | None:
    """Bytes a transcription's estimate may take: `HEADROOM` of the worker's per-task budget
    (`ATTNVIZ_RUN_MB`; None where there is none). The fifth left is the guard's margin over the
    estimate: a worker that ran other models first peaked at 415 MiB on the 16-s view where a fresh
    one did at 356 MiB. (The failures inside oneDNN under the 512 MiB limit after other models in
    TensorFlow were TensorFlow's own arena taking the guard's headroom; the workers now run oneDNN
    on malloc, `attnviz.exec.local.TF_ALLOCATOR`.)"""
    limit = Limits.from_env().memory_mb
    return None if limit is None else int(HEADROOM * limit * MIB)


def check_memory(config, positions: int) -> int:
    """Refuse a transcription keeping the encoder's view of `positions` audio positions whose estimate
    (`budget.speech_bytes`) is over `memory_budget()`, before it runs.

    Whisper's 30-s window is fixed, so its base (≈ 350 MiB estimated for tiny.en) is over the pages'
    256 MiB whatever the clip: what the visitor chooses — the seconds the encoder's view covers — is
    checked against the guard that would otherwise end the run (issue 46 §23: a 30-s clip with the
    view peaked at 522 MiB in PyTorch, over the 512 MiB).

    Raises:
        BudgetError: naming the estimate and how many seconds of sound fit with the view.
    """
    seconds = -(-positions // PER_SECOND)
    need = lambda s: budget.speech_bytes(config, min(positions, s * PER_SECOND))  # noqa: E731
    allowed = memory_budget()
    what = "The encoder's self-attention" if positions else "A transcription"
    return budget.check(
        what, need, seconds, need(seconds) if allowed is None else allowed, "seconds of sound"
    )
