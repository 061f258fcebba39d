"""Whisper's log-mel spectrogram (Radford et al., 2022; `whisper/audio.py`): the clip padded or cut
to 30 s, a 400-sample periodic Hann window every 160 samples (25 ms every 10 ms, centred, reflected
at the ends), the power spectrum, 80 mel bands on the Slaney scale (librosa's `mel`, area-normalised
triangles), log10, floored at the maximum minus 8 (80 dB), then `(x + 4) / 4`. Shapes: M mel bands,
F frequency bins (201), N frames (3000).
"""

from __future__ import annotations

import numpy as np

from attnviz.audio.wav import HOP, N_FFT, N_MELS, N_SAMPLES, SAMPLE_RATE, Audio


def hz_to_mel(f: np.ndarray) -> np.ndarray:
    """The Slaney mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
    return np.where(f >= 1000.0, log, 3.0 * f / 200.0)


def mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), 200.0 * m / 3.0)


def mel_filters(n_mels: int = N_MELS, n_fft: int = N_FFT, rate: int = SAMPLE_RATE) -> np.ndarray:
    """`(M, F)`: triangles over the FFT bins between mel points equally spaced from 0 Hz to the
    Nyquist frequency, each scaled to unit area (Slaney's normalisation)."""
    bins = np.linspace(0.0, rate / 2, n_fft // 2 + 1)  # (F,) each bin's frequency
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(rate / 2), n_mels + 2))  # (M + 2,)
    rise = (bins[None] - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]  # (M, F)
    fall = (edges[2:, None] - bins[None]) / (edges[2:] - edges[1:-1])[:, None]  # (M, F)
    triangles = np.maximum(0.0, np.minimum(rise, fall))
    return triangles * (2.0 / (edges[2:] - edges[:-2]))[:, None]  # (M, F)


_FILTERS = mel_filters().astype(np.float32)


def power_spectrum(x: np.ndarray) -> np.ndarray:
    """`(F, N)`: |STFT|² of `x` with a periodic Hann window, frames centred (reflect-padded), the
    last frame dropped as Whisper does."""
    x = np.pad(x.astype(np.float64), N_FFT // 2, mode="reflect")
    n = 1 + (len(x) - N_FFT) // HOP
    frames = np.lib.stride_tricks.as_strided(x, (n, N_FFT), (x.strides[0] * HOP, x.strides[0]))  # (n, N_FFT)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    spectrum = np.fft.rfft(frames * window, axis=-1)  # (n, F)
    return (np.abs(spectrum) ** 2).T[:, :-1]  # (F, n − 1)


def log_mel(audio: Audio | np.ndarray) -> np.ndarray:
    """Whisper's input `(80, 3000)` float32 from `Audio` or 16 kHz samples `(n,)`."""
    x = audio.samples if isinstance(audio, Audio) else np.asarray(audio, dtype=np.float32)
    x = np.pad(x[:N_SAMPLES], (0, max(0, N_SAMPLES - len(x))))  # (480000,): padded or cut to 30 s
    mel = _FILTERS.astype(np.float64) @ power_spectrum(x)  # (M, N)
    log = np.log10(np.maximum(mel, 1e-10))
    log = np.maximum(log, log.max() - 8.0)  # at most 80 dB below the loudest
    return ((log + 4.0) / 4.0).astype(np.float32)
