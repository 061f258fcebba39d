"""Issue 45: every task a screen submits with a device passes it to the library.

Here (no GPU) "gpu" must reach the library, which refuses it with a `SpecError` on field "device"
(`resolve_device`): a task that dropped its `device` would run on the CPU and return. On a machine
with a GPU each task runs there instead (the library lane's `gpu` tests compare the numbers).
"""

from __future__ import annotations

import pytest

from attnviz import pretrained
from attnviz.app.decoding import tasks as decoding
from attnviz.app.interpret import tasks as interp
from attnviz.app.models import tasks as models
from attnviz.app.speech import tasks as speech
from attnviz.app.speech import work as speech_ui
from attnviz.errors import SpecError
from attnviz.frameworks import backend, prepare
from attnviz.pretrained import tasks as checkpoint
from tests.app.conftest import TINY_GPT2

pytest.importorskip("transformers", reason="transformers builds the test's decoder")

TEXT, CLEAN, CORRUPTED = "The cat sat on the mat", "The cat sat on the mat", "The dog sat on the mat"
# task: a call of it on the tiny GPT-2 (its folder) on `device`
CALLS = {
    "forward": lambda src, d: checkpoint.forward(src, TEXT, "torch", device=d),
    "generate": lambda src, d: checkpoint.generate(src, TEXT, "torch", 2, 0.0, None, 0, d),
    "head_importance": lambda src, d: checkpoint.head_importance(src, TEXT, "torch", device=d),
    "decoding_trace": lambda src, d: decoding.decoding_trace(src, TEXT, "torch", 2, device=d),
    "time_per_token": lambda src, d: decoding.time_per_token(src, TEXT, "torch", 2, 1, device=d),
    "compare_models": lambda src, d: models.compare_models(src, src, TEXT, "torch", 4, 1, 0, device=d),
    "logit_lens": lambda src, d: interp.logit_lens(src, TEXT, "torch", device=d),
    "role_scan": lambda src, d: interp.role_scan(src, "torch", 4, 1, 0, device=d),
    "patching_sweep": lambda src, d: interp.patching_sweep(src, CLEAN, CORRUPTED, " the", " t", "torch", device=d),
    "attribution": lambda src, d: interp.attribution(src, CLEAN, CORRUPTED, " the", " t", "torch", device=d),
}  # fmt: skip


@pytest.fixture
def tiny(gpt_folders) -> str:
    """The session's tiny random GPT-2, by its folder (as a page sends a checkpoint it allowed)."""
    return str(gpt_folders / TINY_GPT2)


def gpu_present() -> bool:
    prepare("torch")
    return bool(backend("torch").gpu_available())


def runs_on_gpu_or_names_the_device(call) -> None:
    if gpu_present():  # a GPU machine: the task runs there
        call("gpu")
        return
    with pytest.raises(SpecError) as refused:
        call("gpu")
    assert refused.value.field == "device", str(refused.value)


@pytest.mark.parametrize("task", list(CALLS))
def test_each_task_passes_its_device_to_the_library(task, tiny):
    runs_on_gpu_or_names_the_device(lambda device: CALLS[task](tiny, device))


@pytest.mark.slow
@pytest.mark.skipif(speech_ui.MODEL not in pretrained.speech_choices(), reason=speech_ui.install_note())
def test_the_transcription_passes_its_device_to_whisper():
    clip = speech_ui.clip_bytes("fox")
    runs_on_gpu_or_names_the_device(
        lambda device: speech.transcribe(speech_ui.MODEL, clip, "torch", device=device)
    )
