"""A WAV file read into what a speech model hears: 16 kHz mono float32, at most 30 s.

`read_wav` takes a WAV file's bytes or path (mono or stereo, 8–48 kHz, 8/16/32-bit PCM or float),
checks it, mixes it to mono and resamples it to 16 kHz with SciPy's polyphase filter; a clip over
30 s is cut to its first 30 s (the model's window), and the result says so.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz import formats
from attnviz.errors import SpecError

SAMPLE_RATE = 16_000
N_FFT, HOP, N_MELS = 400, 160, 80
SECONDS = 30
N_SAMPLES = SAMPLE_RATE * SECONDS  # 480,000: the model's window
N_FRAMES = N_SAMPLES // HOP  # 3000 mel frames
MIN_RATE, MAX_RATE = 8_000, 48_000
MAX_BYTES = 32 << 20  # 32 MiB: 30 s of 48 kHz stereo float32 is 11 MiB
SILENT = 1e-4  # peak below this (of full scale): no sound to transcribe
_WAV = f"a WAV file (RIFF/WAVE) of at most {formats.size(MAX_BYTES)}: mono or stereo, {MIN_RATE:,}–{MAX_RATE:,} Hz, 8/16/32-bit PCM or 32/64-bit float samples"
_SCALE = {np.dtype(np.uint8): 128.0, np.dtype(np.int16): 32768.0, np.dtype(np.int32): 2.0**31}


@dataclass(frozen=True)
class Audio:
    """A clip ready for the model.

    Attributes:
        samples: `(n,)` float32 at 16 kHz, mono, at most 30 s.
        seconds: the clip's length as read (before any cut).
        rate: the file's sample rate; channels: the file's channels.
    """

    samples: np.ndarray
    seconds: float
    rate: int
    channels: int

    @property
    def cut(self) -> bool:
        """Whether the clip was longer than the model's 30 s (only the first 30 s are kept)."""
        return self.seconds > SECONDS

    @property
    def kept_seconds(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def _bytes_of(source: bytes | str | os.PathLike) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise SpecError("audio", str(source), _WAV, value_text=f"{str(source)!r}, not a file")
        if path.stat().st_size > MAX_BYTES:
            raise SpecError("audio", None, _WAV, value_text=f"a {formats.size(path.stat().st_size)} file")
        data = path.read_bytes()
    else:
        raise SpecError("audio", None, _WAV, value_text=f"a value of type {type(source).__name__}")
    if len(data) > MAX_BYTES:
        raise SpecError("audio", None, _WAV, value_text=formats.size(len(data)))
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise SpecError("audio", None, _WAV, value_text="data that is not a WAV file (no RIFF/WAVE header)")
    return data


def _as_float(samples: np.ndarray) -> np.ndarray:
    """PCM or float samples → float32 in [-1, 1]."""
    if samples.dtype.kind == "f":
        return samples.astype(np.float32)
    if samples.dtype not in _SCALE:
        raise SpecError("audio", None, _WAV, value_text=f"{samples.dtype} samples")
    offset = 128.0 if samples.dtype == np.uint8 else 0.0  # 8-bit WAV is unsigned
    return ((samples.astype(np.float32) - offset) / _SCALE[samples.dtype]).astype(np.float32)


def read_wav(source: bytes | str | os.PathLike) -> Audio:
    """A WAV file's bytes or path → `Audio` (16 kHz mono float32, the first 30 s).

    Raises:
        SpecError: (field "audio") not a WAV, over 32 MiB, a rate outside 8–48 kHz, more than two
            channels, no samples, NaN or infinite samples, or silence.
    """
    from scipy.io import wavfile
    from scipy.signal import resample_poly

    data = _bytes_of(source)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", wavfile.WavFileWarning)  # chunks it skips (LIST, fact)
            rate, samples = wavfile.read(io.BytesIO(data))
    except Exception as error:  # a broken file fails anywhere in SciPy's reader (UnboundLocalError too)
        raise SpecError(
            "audio", None, _WAV, value_text=f"a WAV file SciPy cannot read ({type(error).__name__})"
        ) from None
    if not MIN_RATE <= rate <= MAX_RATE:
        raise SpecError("audio", rate, _WAV, value_text=f"a sample rate of {rate:,} Hz")
    channels = 1 if samples.ndim == 1 else samples.shape[1]
    if channels > 2:
        raise SpecError("audio", channels, _WAV, value_text=f"{channels} channels")
    x = _as_float(samples)
    x = x if x.ndim == 1 else x.mean(axis=1)  # (n,): stereo mixed to mono
    if x.size == 0:
        raise SpecError("audio", None, _WAV, value_text="a WAV file with no samples")
    if not np.isfinite(x).all():
        raise SpecError("audio", None, "finite samples", value_text="NaN or infinite samples")
    if np.abs(x).max() < SILENT:
        raise SpecError(
            "audio", None, "a clip with sound (a peak above 1e-4 of full scale)", value_text="silence"
        )
    seconds = x.size / rate
    x = x[: SECONDS * rate]  # the model's window: the first 30 s
    if rate != SAMPLE_RATE:
        g = np.gcd(rate, SAMPLE_RATE)
        x = resample_poly(x, SAMPLE_RATE // g, rate // g).astype(np.float32)
    return Audio(x[:N_SAMPLES], seconds, int(rate), channels)
