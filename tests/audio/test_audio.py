"""attnviz.audio (issue 43): WAV files of every allowed kind read into 16 kHz mono float32, bad ones
refused with a SpecError naming what was wrong; Whisper's log-mel against transformers'
`WhisperFeatureExtractor` (1e-3); the CTranslate2 `model.bin` reader on hand-written files; the word
timing's median filter and DTW against independent computations. No model: fast."""

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.ndimage import median_filter as scipy_median

from attnviz.audio import MAX_BYTES, N_FRAMES, N_MELS, SECONDS, log_mel, mel_filters, read_wav
from attnviz.errors import SpecError
from attnviz.pretrained.families.ctranslate2 import read_model_bin
from attnviz.pretrained.files import CheckpointError
from attnviz.pretrained.speech.timing import dtw, median_filter
from tests.conftest import ATOL_MEL, SEED

CLIP = Path(__file__).parents[2] / "assets" / "speech" / "fox.wav"


def wav(samples: np.ndarray, rate: int) -> bytes:
    out = io.BytesIO()
    wavfile.write(out, rate, samples)
    return out.getvalue()


def tone(rate: int, seconds: float = 1.0, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize(
    "encode",
    [
        lambda x: np.round(x * 127 + 128).astype(np.uint8),
        lambda x: np.round(x * 32767).astype(np.int16),
        lambda x: np.round(x * 2**31 * 0.999).astype(np.int32),
        lambda x: x.astype(np.float32),
        lambda x: x.astype(np.float64),
        lambda x: np.stack([x, x], 1).astype(np.float32),  # stereo, the same on both channels
    ],
    ids=["u8", "i16", "i32", "f32", "f64", "stereo"],
)
def test_every_sample_format_reads_to_the_same_sound(encode):
    x = tone(16_000)
    audio = read_wav(wav(encode(x), 16_000))
    assert audio.samples.dtype == np.float32 and audio.samples.shape == x.shape
    assert np.abs(audio.samples - x).max() <= 1 / 100  # 8-bit steps are 1/128


@pytest.mark.parametrize("rate", [8_000, 22_050, 44_100, 48_000])
def test_other_rates_are_resampled_to_16_khz(rate, tmp_path):
    path = tmp_path / "tone.wav"
    path.write_bytes(wav(tone(rate), rate))
    audio = read_wav(path)
    assert audio.rate == rate and len(audio.samples) == 16_000
    inner = slice(400, -400)  # the filter's edges aside
    assert np.abs(audio.samples[inner] - tone(16_000)[inner]).max() < 0.02


def test_a_clip_over_30_seconds_keeps_its_first_30():
    audio = read_wav(wav(tone(16_000, 31.5), 16_000))
    assert audio.cut and audio.seconds == 31.5 and audio.kept_seconds == SECONDS


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"ID3 this is an mp3" * 10, "not a WAV"),
        (wav(np.zeros(0, np.int16), 16_000), "no samples"),
        (wav(np.zeros(16_000, np.int16), 16_000), "silence"),
        (wav(tone(16_000), 1), "1 Hz"),
        (wav(tone(16_000), 1_000_000), "1,000,000 Hz"),
        (wav(np.full(100, np.nan, np.float32), 16_000), "NaN"),
        (wav(np.zeros((100, 3), np.int16) + 1000, 16_000), "3 channels"),
        (b"RIFF" + bytes(MAX_BYTES), "MiB"),
        (b"RIFF\x00\x00\x00\x00WAVEjunk", "cannot read"),
    ],
    ids=["not-wav", "empty", "silent", "1Hz", "1MHz", "nan", "3ch", "huge", "broken"],
)
def test_bad_audio_is_a_spec_error_that_says_what_and_what_is_allowed(data, says):
    with pytest.raises(SpecError) as caught:
        read_wav(data)
    assert caught.value.field == "audio" and says in str(caught.value) and caught.value.allowed


def test_not_bytes_nor_a_path():
    with pytest.raises(SpecError, match="of type int"):
        read_wav(3)
    with pytest.raises(SpecError, match="not a file"):
        read_wav("/no/such/clip.wav")


@pytest.fixture(scope="module")
def extractor():
    transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
    return transformers.WhisperFeatureExtractor()


def test_mel_filters_are_transformers(extractor):
    assert np.abs(mel_filters() - extractor.mel_filters.T).max() < 1e-7


@pytest.mark.parametrize("kind", ["speech", "chirp", "long"])
def test_log_mel_is_whisper_feature_extractor(extractor, kind):
    rng = np.random.default_rng(SEED)
    if kind == "speech":
        x = read_wav(CLIP).samples
    elif kind == "chirp":
        t = np.arange(40_000) / 16_000
        x = (0.3 * np.sin(2 * np.pi * (100 + 3000 * t) * t) + 0.01 * rng.standard_normal(t.size)).astype(
            np.float32
        )
    else:  # over 30 s: both cut to the first 30 s
        x = (0.1 * rng.standard_normal(16_000 * 31)).astype(np.float32)
    ours = log_mel(x)
    theirs = extractor(x[: 16_000 * SECONDS], sampling_rate=16_000, return_tensors="np").input_features[0]
    assert ours.shape == (N_MELS, N_FRAMES) and np.isfinite(ours).all()
    assert np.abs(ours - theirs).max() <= ATOL_MEL


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _model_bin(variables: dict[str, np.ndarray], aliases=(), version: int = 6) -> bytes:
    """A model.bin as CTranslate2's `_serialize` lays it out (written here from its description)."""
    ids = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.float16): 4}
    out = struct.pack("<I", version) + _string("TestSpec") + struct.pack("<I", 1)
    out += struct.pack("<I", len(variables))
    for name, value in variables.items():
        out += (
            _string(name)
            + struct.pack("<B", value.ndim)
            + b"".join(struct.pack("<I", d) for d in value.shape)
        )
        out += struct.pack("<BI", ids[value.dtype], value.nbytes) + value.tobytes()
    out += struct.pack("<I", len(aliases))
    return out + b"".join(_string(a) + _string(b) for a, b in aliases)


def test_model_bin_reader(tmp_path):
    w = np.arange(6, dtype=np.float16).reshape(2, 3) / 4
    (tmp_path / "model.bin").write_bytes(
        _model_bin(
            {"a/weight": w, "a/flag": np.array(1, np.int8), "b": np.ones(2, np.float32)}, [("c", "a/weight")]
        )
    )
    spec, got = read_model_bin(tmp_path)
    assert spec == "TestSpec" and got["a/weight"].dtype == np.float32
    assert np.array_equal(got["a/weight"], w.astype(np.float32)) and got["c"] is got["a/weight"]
    assert int(got["a/flag"]) == 1 and got["b"].shape == (2,)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (_model_bin({"w": np.ones(4, np.float16)})[:-3], "cut short"),
        (_model_bin({"w": np.ones(4, np.float16)}, version=2), "version"),
        (_model_bin({"w": np.full(4, np.inf, np.float32)}), "NaN, inf"),
        (_model_bin({"w": np.ones(4, np.float16)}, [("x", "nothing")]), "unknown"),
    ],
    ids=["truncated", "version", "inf", "alias"],
)
def test_bad_model_bin_is_a_checkpoint_error(tmp_path, data, says):
    (tmp_path / "model.bin").write_bytes(data)
    with pytest.raises(CheckpointError, match=says):
        read_model_bin(tmp_path)


def test_median_filter_is_scipys_with_mirrored_ends():
    x = np.random.default_rng(SEED).standard_normal((3, 5, 40)).astype(np.float32)
    assert np.allclose(median_filter(x), scipy_median(x, size=(1, 1, 7), mode="mirror"))


@pytest.mark.parametrize("shape", [(1, 1), (4, 9), (7, 30)])
def test_dtw_path_is_monotone_and_as_cheap_as_the_best(shape):
    cost = np.random.default_rng(SEED).random(shape).astype(np.float32)
    rows, cols = dtw(cost)
    assert (rows[0], cols[0]) == (0, 0) and (rows[-1], cols[-1]) == (shape[0] - 1, shape[1] - 1)
    steps = np.stack([np.diff(rows), np.diff(cols)], 1)
    assert all(tuple(s) in {(0, 1), (1, 0), (1, 1)} for s in steps)
    best = np.full((shape[0] + 1, shape[1] + 1), np.inf)  # the cheapest total, by rows
    best[0, 0] = 0
    for i in range(1, shape[0] + 1):
        for j in range(1, shape[1] + 1):
            best[i, j] = cost[i - 1, j - 1] + min(best[i - 1, j - 1], best[i - 1, j], best[i, j - 1])
    assert np.isclose(cost[rows, cols].sum(), best[-1, -1], rtol=1e-5)
