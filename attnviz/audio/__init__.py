"""Sound for a speech model: `wav.py` reads a WAV file into 16 kHz mono float32 (`read_wav`, `Audio`);
`mel.py` computes Whisper's log-mel spectrogram (`log_mel`, `mel_filters`)."""

from attnviz.audio.mel import hz_to_mel, log_mel, mel_filters, mel_to_hz, power_spectrum
from attnviz.audio.wav import (
    HOP,
    MAX_BYTES,
    MAX_RATE,
    MIN_RATE,
    N_FFT,
    N_FRAMES,
    N_MELS,
    N_SAMPLES,
    SAMPLE_RATE,
    SECONDS,
    Audio,
    read_wav,
)

__all__ = [
    "HOP",
    "MAX_BYTES",
    "MAX_RATE",
    "MIN_RATE",
    "N_FFT",
    "N_FRAMES",
    "N_MELS",
    "N_SAMPLES",
    "SAMPLE_RATE",
    "SECONDS",
    "Audio",
    "hz_to_mel",
    "log_mel",
    "mel_filters",
    "mel_to_hz",
    "power_spectrum",
    "read_wav",
]
