"""Issue 45: the device control on every screen that runs a real model (Pretrained, Decoding,
Interpretability, Compare models, Speech), without a GPU.

The worker's answer to "does PyTorch see a GPU?" is the one the pages read (`loading._GPU`, kept per
server), faked here; the door's `run` records each task a page submits instead of running it (and
ends it as a stopped run, so nothing computes). With a GPU: the "Device" radio is in the sidebar and
each submitted task gets `device="gpu"`. Without one: no radio, `device="cpu"`, and a link's
`<screen>.device=gpu` is dropped with a note naming what is allowed.
"""

from __future__ import annotations

import os

import pytest

from attnviz import exec as ex
from attnviz import pretrained
from attnviz.app.decoding import tasks as decoding_tasks
from attnviz.app.frame import door, loading
from attnviz.app.interpret import tasks as interp_tasks
from attnviz.app.models import tasks as models_tasks
from attnviz.app.speech import tasks as speech_tasks
from attnviz.app.speech import work as speech_ui
from attnviz.pretrained import sources
from attnviz.pretrained import tasks as checkpoint_tasks
from tests.app.conftest import TINY_GEMMA3, TINY_GPT2, assert_clean, open_directly, plain

pytest.importorskip("transformers", reason="transformers builds the test's decoders")

A, B = TINY_GPT2, TINY_GEMMA3  # the session's tiny random decoders (Compare models needs two)
SPEECH = pytest.mark.skipif(
    speech_ui.MODEL not in pretrained.speech_choices(), reason=speech_ui.install_note()
)
# screen: (its URL prefix, a link to a view that submits at once, the task its first run submits)
SCREENS = {
    "pretrained": ("pre.", {"pre.checkpoint": A, "pre.text": "the cat sat"}, checkpoint_tasks.forward),
    "decoding": ("decoding.", {"decoding.checkpoint": A, "decoding.new_tokens": "2"}, decoding_tasks.decoding_trace),
    "interpret": ("interp.", {"interp.checkpoint": A, "interp.half": "4", "interp.n": "1"}, interp_tasks.role_scan),
    "models": ("models.", {"models.first": A, "models.second": B, "models.text": "the cat sat", "models.half": "4",
                           "models.n": "1"},
               models_tasks.compare_models),
    "speech": ("speech.", {"speech.clip": "fox"}, speech_tasks.transcribe),
}  # fmt: skip
PARAMS = [pytest.param(name, marks=SPEECH if name == "speech" else ()) for name in SCREENS]


@pytest.fixture
def submitted(gpt_folders, gemma_folders, monkeypatch):
    """The tasks the page submits, `(task, kwargs)`, each ended as a stopped run instead of running.
    The tiny decoders are the only text models offered: Decoding and Compare models read every offered
    checkpoint's kind, and a packaged one's first read converts its GGUF file (two minutes here)."""
    monkeypatch.setenv(pretrained.ENV_DIRS, os.pathsep.join(map(str, (gpt_folders, gemma_folders))))
    found = sources.local_checkpoints()
    speech = {name: found[name] for name in found if sources.PACKAGED[name].kind == "speech"}
    monkeypatch.setattr(sources, "local_checkpoints", lambda: speech)
    calls = []

    def record(task, *args, **kwargs):
        calls.append((task, kwargs))
        raise ex.Stopped()

    monkeypatch.setattr(door, "run", record)
    return calls


def gpu(monkeypatch, present: bool) -> None:
    """The worker's kept answer, as `loading.gpu_known` returns it (no worker is asked)."""
    for framework in ("torch", "tensorflow"):
        monkeypatch.setitem(loading._GPU, framework, present)


def radios(at, key: str):
    """The sidebar's radios keyed `key` (the explorer's folded configuration has a "Device" of its own)."""
    return [r for r in at.sidebar.radio if r.key == key]


@pytest.mark.parametrize("screen", PARAMS)
def test_with_a_gpu_the_screen_offers_it_and_its_task_runs_there(screen, submitted, monkeypatch):
    prefix, link, task = SCREENS[screen]
    gpu(monkeypatch, True)
    at = open_directly(screen, {**link, prefix + "device": "gpu"})
    assert_clean(at)
    (device,) = radios(at, prefix + "device")
    assert device.label == "Device" and device.value == "gpu" and list(device.options) == ["cpu", "gpu"]
    assert task in [t for t, _ in submitted], [t.__name__ for t, _ in submitted]
    assert {kw.get("device") for t, kw in submitted if t is task} == {"gpu"}


@pytest.mark.parametrize("screen", PARAMS)
def test_without_a_gpu_no_control_the_cpu_and_a_gpu_link_is_dropped_with_a_note(
    screen, submitted, monkeypatch
):
    prefix, link, task = SCREENS[screen]
    gpu(monkeypatch, False)
    at = open_directly(screen, {**link, prefix + "device": "gpu"})
    assert_clean(at)
    assert not radios(at, prefix + "device")
    assert {kw.get("device") for t, kw in submitted if t is task} == {"cpu"}
    notes = " ".join(plain(w.value) for w in at.main.warning)  # above the page: a phone's sidebar is closed
    assert f"URL parameter {prefix}device='gpu' ignored; allowed: cpu (no GPU is visible to PyTorch" in notes
    assert prefix + "device" not in at.query_params
