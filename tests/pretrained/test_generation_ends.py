"""Where generation ends and why (issue 29 §1, issue 33): `Checkpoint.generate` ends at the token
limit, at an end token (`stop_at`, kept), or when its monitor says stop, keeping the tokens so far;
it reports each token to the monitor as it is drawn. On a tiny random GPT-2 built with transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnviz import pretrained
from attnviz.exec.monitor import Monitor
from tests.conftest import RTOL_MODEL, assert_close

pytest.importorskip("transformers", reason="transformers builds the tiny GPT-2")

TEXT = "The cat"
NEW = 12


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    from tests.pretrained.test_gpt2 import make_tiny_gpt2

    return pretrained.load(make_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=5))


def test_the_limit_is_the_default_end(gpt, framework):
    gen = gpt.generate(TEXT, framework, NEW, seed=2)
    assert gen.ended == "limit" and len(gen.new_ids) == NEW
    assert gen.prompt_length == len(gpt.encode(TEXT)[0])


def test_an_end_token_ends_it_and_is_kept(gpt, framework):
    whole = gpt.generate(TEXT, framework, NEW, temperature=0.8, seed=2)
    end = whole.new_ids[4]  # a token drawn fifth: the first time it is drawn ends the generation
    first = whole.new_ids.index(end)
    gen = gpt.generate(TEXT, framework, NEW, temperature=0.8, seed=2, stop_at=[end])
    assert gen.ended == "end token"
    assert gen.new_ids == whole.new_ids[: first + 1]
    assert gen.probabilities == whole.probabilities[: first + 1]
    np.testing.assert_array_equal(gen.logits, whole.logits[: first + 1])
    rerun = gpt.run_ids(gen.output.ids, framework)  # the figures' run covers exactly what was drawn
    assert_close(gen.output.attentions, rerun.attentions, RTOL_MODEL[framework], "attentions")


def test_stop_keeps_the_tokens_so_far_and_the_monitor_sees_each(gpt, framework):
    seen: list[tuple[int, float]] = []
    monitor = Monitor(lambda done, total, partial: (seen.append(partial), len(seen) >= 3 and monitor.stop()))
    gen = gpt.generate(TEXT, framework, NEW, seed=3, monitor=monitor)
    assert gen.ended == "stopped" and len(gen.new_ids) == 3
    assert seen == list(zip(gen.new_ids, gen.probabilities, strict=True))
    assert gen.new_ids == gpt.generate(TEXT, framework, NEW, seed=3).new_ids[:3]  # the same draws
    assert gen.prompt_length + 3 == len(gen.output.ids)


def test_end_tokens_are_the_configs_and_the_tokenizers(gpt):
    eos = json.loads((gpt.path / "config.json").read_text())["eos_token_id"]
    ends = gpt.end_tokens()
    assert eos in ends
    for i in ends:
        assert i == eos or gpt.tokenizer.id_to_token(i) in pretrained.model.END_TOKENS
