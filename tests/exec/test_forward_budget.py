"""The Pretrained page's forward pass within its estimate (issue 46 §23): for each real model (in the
framework `MODELS` names), the largest text the page's check accepts runs in a worker under the per-run budget
(`RLIMIT_DATA` at `APP_MEMORY_BUDGET`), its measured peak within the estimate; one token more is
refused before anything is submitted, naming how many tokens fit. Whisper likewise on the Speech
page: the longest clip whose encoder view the check accepts, in the module's worker after another model
in TensorFlow, under a guard at its estimate (what the guard counts fits in it too).
"""

from __future__ import annotations

import functools
import io
import wave

import numpy as np
import pytest

from attnviz import exec as engine_api
from attnviz import pretrained
from attnviz.errors import BudgetError
from attnviz.exec.limits import Budget, Limits
from attnviz.exec.local import LocalEngine
from attnviz.pretrained import budget
from attnviz.settings import APP_MEMORY_BUDGET
from tests import door_peaks

WHISPER = "whisper-tiny.en"
# Each model in the framework whose peak came closest to its estimate when both were measured
# (docs/security.md: MiniLM 194 / 217 MiB, SmolLM2 201 / 192 MiB, Gemma 3 139 / 139 MiB, PyTorch /
# TensorFlow): a worker builds each model once per framework, and the suite has little time (Gemma in
# TensorFlow alone took over a minute of it).
MODELS = {
    "all-MiniLM-L6-v2": ("tensorflow",),
    "SmolLM2-135M-Instruct": ("torch",),
    "gemma-3-270m": ("torch",),
}


@pytest.fixture(scope="module")
def engine():
    """One worker for every model and framework: it keeps its frameworks between tasks."""
    local = LocalEngine(Budget(workers=1))
    yield local
    local.close()


def words(card, n: int) -> str:
    """`"w w w …"` of exactly `n` tokens (special tokens included)."""
    k = n
    while (got := len(card.encode(" ".join(["w"] * k))[0])) != n:
        k += n - got
    return " ".join(["w"] * k)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_largest_accepted_forward_runs_within_its_estimate_and_one_more_is_refused(engine, name):
    from attnviz.app.pretrained.runs import check_forward  # the page's own check

    card = pretrained.load_choice(name, weights=False)
    need = functools.partial(budget.forward_bytes, card.config)
    T = budget.largest(need, APP_MEMORY_BUDGET, card.config.max_position_embeddings)
    assert T >= 64, T  # a useful text fits
    text = words(card, T)
    assert check_forward(card, text, None) == need(T) <= APP_MEMORY_BUDGET
    if card.config.max_position_embeddings > T:
        with pytest.raises(BudgetError, match=f"at most {T:,} tokens fit"):
            check_forward(card, words(card, T + 1), None)
    else:  # an encoder reads at most its positions, cutting the rest: then every text fits
        assert card.kind == "encoder" and len(card.encode("w " * 1000)[0]) == T
    limits = Limits(memory_mb=APP_MEMORY_BUDGET / 2**20)  # the worker's own guard at the page's budget
    for framework in MODELS[name]:
        handle = engine_api.submit(
            door_peaks.forward_peak, name, text, framework, engine=engine, limits=limits
        )
        tokens, peak = handle.result()
        assert tokens == T
        assert 0 < peak <= need(T), (framework, peak / 2**20, need(T) / 2**20)


def test_the_page_refuses_gemma_on_500_words_up_front():
    """The issue's link: `pre.text` = "w " × 500 on Gemma 3 is told how many tokens fit, not run."""
    from attnviz.app.pretrained.runs import check_forward

    card = pretrained.load_choice("gemma-3-270m", weights=False)
    fits = budget.largest(functools.partial(budget.forward_bytes, card.config), APP_MEMORY_BUDGET, 500)
    with pytest.raises(BudgetError, match=f"at most {fits:,} tokens fit") as caught:
        check_forward(card, "w " * 500, None)
    assert caught.value.need > APP_MEMORY_BUDGET


def noise_wav(seconds: int) -> bytes:
    """`seconds` of 16 kHz noise: Whisper writes its most tokens on it (the decoder's worst case)."""
    samples = (0.1 * np.random.default_rng(0).standard_normal(16_000 * seconds) * 32767).astype(np.int16)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16_000), w.writeframes(samples.tobytes())
    return out.getvalue()


@pytest.fixture
def used(engine):
    """The module's worker after MiniLM in TensorFlow. In such a worker the first Whisper transcription
    in TensorFlow under the 512 MiB guard failed in two runs of three — inside oneDNN ("could not
    create a primitive"), then with the worker's SIGSEGV — while its peak, unlimited, was 415 MiB:
    TensorFlow's CPU arena grabbed the guard's headroom (issue 46 §23; the workers now run oneDNN on
    malloc, `exec.local.TF_ALLOCATOR`, tests/exec/test_local.py::test_tensorflow_leaves_a_task_its_budget).
    The test gave Whisper a worker of its own then, which hid it."""
    name = "all-MiniLM-L6-v2"
    text = words(pretrained.load_choice(name, weights=False), 512)  # all its positions
    engine_api.submit(door_peaks.forward_peak, name, text, "tensorflow", engine=engine).result()
    return engine


@pytest.mark.slow
def test_whisper_encoder_view_at_the_longest_accepted_clip_runs_within_its_estimate(used):
    from attnviz.app.speech import tasks as speech

    config = pretrained.load_choice(WHISPER).config
    need = lambda s: budget.speech_bytes(config, s * speech.PER_SECOND)  # noqa: E731
    seconds = budget.largest(need, speech.memory_budget(), 30)
    assert 10 <= seconds < 30, seconds  # a useful clip fits; the whole window does not
    assert speech.check_memory(config, seconds * speech.PER_SECOND) == need(seconds)
    assert need(0) <= speech.check_memory(config, 0)  # without the view every clip fits
    with pytest.raises(BudgetError, match=f"at most {seconds} seconds of sound fit"):
        speech.check_memory(config, (seconds + 1) * speech.PER_SECOND)
    wav = noise_wav(seconds)
    # The guard at the estimate itself: what `RLIMIT_DATA` counts (the data segment, which grew up to
    # 17 % more than the resident set) must fit in it too, not only the resident peak.
    limits = Limits(memory_mb=need(seconds) / 2**20, seconds=600)
    for framework in ("tensorflow",):  # its peak was the higher: 356 MiB against PyTorch's 292
        handle = engine_api.submit(
            door_peaks.speech_peak, WHISPER, wav, framework, engine=used, limits=limits
        )
        kept, peak = handle.result()
        assert kept == seconds * speech.PER_SECOND
        assert 0 < peak <= need(seconds), (framework, peak / 2**20, need(seconds) / 2**20)
