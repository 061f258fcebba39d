"""Gemma 3 270M at ~600 tokens against float64 references (issue 46 point 20), written to docs/gemma.md.

    nice -n 5 python benchmarks/gemma_precision.py

The text is `tests/pretrained/test_gemma3.py`'s LONG (~600 tokens: the local layers' 512-token window cuts keys).
Runs, all on the weights of attnviz's converted folder (every tensor equal to what transformers'
own GGUF loading dequantises, checked once by hand on 27 Nov): transformers' eager
`Gemma3ForCausalLM` in float32 and after `.double()`, and attnviz's full pass in both frameworks
and TensorFlow's cached step (the whole prompt as one chunk over a `KVCache`).
Logits are kept at the last 64 positions only (a run's whole float64 logits are 1.2 GB). Two
references: transformers after `.double()` as it runs — its rotary embedding still computes the
angles and their cos/sin in float32 (`Gemma3RotaryEmbedding.forward` casts to float), so this
reference shares transformers' float32 rotary tables — and the same model with the angles in float64
too (the rotary forward replaced by its float64 formula), the one reference with no float32 step.
Reported: each run's largest |Δ weight| over every layer, head, query and key, and its logits'
largest |Δ| over the largest |logit|, against each reference; then the TensorFlow full pass again
with PyTorch's rotary tables put in (the experiment that names the cause). One sample each: these
are rounding differences, not timings, so the machine's load does not change them.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import write_section  # noqa: E402
from benchmarks.llama_bench import uptime  # noqa: E402

DOC = ROOT / "docs" / "gemma.md"
KEPT = 64  # logits compared at the last 64 positions: 602 × 262,144 float64 logits are 1.2 GB a run
START, END = "<!-- gemma_precision:start -->", "<!-- gemma_precision:end -->"


def transformers_runs(path: Path, ids: list[int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """`{name: (attentions (L, H, T, T), logits (T, V))}` of transformers' eager model: float32,
    float64 as `.double()` runs it, float64 with float64 rotary tables."""
    import torch
    import transformers
    from transformers.models.gemma3 import modeling_gemma3

    from tests.pretrained.test_gemma3 import float64_rotary

    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), attn_implementation="eager").eval()

    def run() -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True)
        return torch.stack(out.attentions)[:, 0].double().numpy(), out.logits[0, -KEPT:].double().numpy()

    runs = {"transformers float32": run()}
    model.double()
    runs["transformers .double() (float32 rotary)"] = run()
    forward = modeling_gemma3.Gemma3RotaryEmbedding.forward
    try:
        modeling_gemma3.Gemma3RotaryEmbedding.forward = float64_rotary  # the test's one copy
        runs["float64 throughout"] = run()
    finally:
        modeling_gemma3.Gemma3RotaryEmbedding.forward = forward
    return runs


def attnviz_runs(ckpt, text: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """attnviz's full pass in both frameworks, TensorFlow's cached step, and TensorFlow's full pass
    with PyTorch's rotary tables."""
    import tensorflow as tf
    import torch

    from attnviz.backends.common import to_numpy
    from attnviz.backends.tf_backend import attention as tf_attention
    from attnviz.backends.torch_backend import attention as torch_attention

    runs = {}
    for framework in ("torch", "tensorflow"):
        out = ckpt.run(text, framework)
        runs[f"attnviz {framework}"] = (
            np.asarray(out.attentions, np.float64),
            np.asarray(out.logits[-KEPT:], np.float64),
        )
    model, ids = ckpt.model("tensorflow"), out.ids
    cache = model.new_cache(weights=True)
    last = model.step(ids, cache)[0]  # (V,)
    weights = np.stack([to_numpy(w)[0] for w in cache.weights]).astype(np.float64)  # (L, H, T, T)
    runs["attnviz tensorflow, cached step"] = (weights, np.asarray(last, np.float64)[None])

    def torch_tables(length, width, base, dtype):
        like = torch.zeros(1, dtype=torch.float32)
        cos, sin = torch_attention.rotary(int(length), width, base, like)  # (length, width)
        return tf.constant(cos.numpy()), tf.constant(sin.numpy())

    angles = tf_attention._rotary_angles
    try:
        tf_attention._rotary_angles = torch_tables
        tf_attention._rotary_table.cache_clear()
        out = ckpt.run(text, "tensorflow")
        runs["attnviz tensorflow, PyTorch's rotary tables"] = (
            np.asarray(out.attentions, np.float64),
            np.asarray(out.logits[-KEPT:], np.float64),
        )
    finally:
        tf_attention._rotary_angles = angles
        tf_attention._rotary_table.cache_clear()
    return runs


def errors(run: tuple[np.ndarray, np.ndarray], ref: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
    """Largest |Δ weight|, and the logits' largest |Δ| over the largest |logit| (the rows the run has:
    a cached step gives the last)."""
    (a, logits), (a_ref, logits_ref) = run, ref
    logits_ref = logits_ref[-len(logits) :]
    return float(np.abs(a - a_ref).max()), float(np.abs(logits - logits_ref).max() / np.abs(logits_ref).max())


def main() -> None:
    from attnviz import pretrained
    from tests.pretrained.test_gemma3 import LONG

    before, started = uptime(), datetime.datetime.now(datetime.UTC)
    ckpt = pretrained.load_choice("gemma-3-270m")
    ours = attnviz_runs(ckpt, LONG)
    ids = ckpt.encode(LONG)[0]
    theirs = transformers_runs(ckpt.path, ids)
    refs = ["transformers .double() (float32 rotary)", "float64 throughout"]
    runs = {k: v for k, v in theirs.items() if k not in refs[1:]} | ours
    lines = [
        "| run | weights vs `.double()` | logits vs `.double()` | weights vs float64 throughout | logits vs float64 throughout |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, run in runs.items():
        if name == refs[0]:
            cells = ["—", "—", *(f"{e:.1e}" for e in errors(run, theirs[refs[1]]))]
        else:
            cells = [f"{e:.1e}" for ref in refs for e in errors(run, theirs[ref])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    same = np.array_equal(ours["attnviz torch"][0], theirs["transformers float32"][0])
    text = (
        f"Measured {started:%Y-%m-%d %H:%M} UTC by `benchmarks/gemma_precision.py` on {len(ids)} tokens "
        f"(load before: `{before}`; after: `{uptime()}`; the machine is shared with other engineers' "
        f"work, which changes no number here). attnviz PyTorch's weights bitwise equal to transformers' "
        f"float32: {same}.\n\n" + "\n".join(lines)
    )
    write_section(DOC, text, START, END)
    print(text)


if __name__ == "__main__":
    main()
