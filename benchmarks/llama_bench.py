"""Measure SmolLM2-135M-Instruct through attnviz (issue 17 §4) and write the figures into docs/llama.md.

    nice -n 5 python benchmarks/llama_bench.py          # ~3–10 minutes, depending on the machine's load
    python benchmarks/llama_bench.py --repeats 3        # quicker, noisier

What is timed, each in this one process, with the machine's load average before and after:
- first load: the GGUF converted into a fresh cache folder (dequantise, un-permute, write);
- warm load: `pretrained.load` of the converted folder (checkpoint cache emptied first);
- a forward pass over 32 tokens returning every layer's attention: attnviz PyTorch and TensorFlow
  against transformers' eager `LlamaForCausalLM` on the same weights (read from the converted
  folder), interleaved, median of `--repeats`; ratios side by side;
- 20 generated tokens (greedy, the chat template applied): attnviz (each step one full forward
  pass with all attentions, as the page draws them) and transformers' `generate` (KV cache).

PyTorch (attnviz and transformers) and TensorFlow run on `--threads` intra-op threads, as the app
does (`ATTNVIZ_THREADS`). Besides wall time, the process's CPU time (all its threads) is recorded:
on a shared machine the wall time includes waiting for a core, the CPU time does not.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "llama.md"
RESULTS = ROOT / "test-artifacts" / "llama-bench.json"
START, END = "<!-- llama_bench:start -->", "<!-- llama_bench:end -->"
NAME = "SmolLM2-135M-Instruct"
TEXT = (
    "Attention lets every token look at the tokens before it; rotary embeddings turn queries and keys "
    "by their position, and grouped heads share keys and values between several queries."
)
TARGETS = {"torch": 1.5, "tensorflow": 2.5}


def timed(fn, cpu: list | None = None) -> float:
    """Wall seconds of `fn()`; its CPU seconds (all threads of this process) appended to `cpu`."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def measure(repeats: int, threads: int) -> dict:
    import torch
    import transformers

    from attnviz import pretrained
    from attnviz.frameworks import backend
    from attnviz.pretrained import chat, gguf

    for framework in ("torch", "tensorflow"):  # as the app does (ATTNVIZ_THREADS), before either runs
        backend(framework).set_threads(threads)
    out = {"load_before": os.getloadavg(), "threads": threads}
    source = pretrained.local_checkpoints()[NAME]
    with tempfile.TemporaryDirectory() as cache:
        os.environ[gguf.ENV_CACHE_DIR] = cache
        cpu = []
        out["first_load_s"] = timed(lambda: gguf.converted(source), cpu)
        pretrained.CACHE.clear()
        out["warm_load_s"] = timed(lambda: pretrained.load(source), cpu)
        out["first_load_cpu_s"], out["warm_load_cpu_s"] = cpu
        checkpoint = pretrained.load(source)
        folder = gguf.converted(source)
        hf = transformers.LlamaForCausalLM.from_pretrained(str(folder), attn_implementation="eager").eval()
        ids = checkpoint.encode(TEXT)[0][:32]
        text = checkpoint.tokenizer.decode(ids)
        assert checkpoint.encode(text)[0] == ids, "the 32-token text must encode to itself"
        for framework in ("torch", "tensorflow"):
            out[f"build_{framework}_s"] = timed(lambda fw=framework: checkpoint.run("warm up", fw))

        def transformers_forward():
            with torch.inference_mode():
                hf(torch.tensor([ids]), output_attentions=True)

        runs = {"torch": [], "tensorflow": [], "transformers": []}
        cpu = {name: [] for name in runs}
        for _ in range(repeats):  # interleaved, so a burst of load hits all three alike
            runs["transformers"].append(timed(transformers_forward, cpu["transformers"]))
            runs["torch"].append(timed(lambda: checkpoint.run(text, "torch"), cpu["torch"]))
            runs["tensorflow"].append(timed(lambda: checkpoint.run(text, "tensorflow"), cpu["tensorflow"]))
        out["forward_s"] = {k: statistics.median(v) for k, v in runs.items()}
        out["forward_cpu_s"] = {k: statistics.median(v) for k, v in cpu.items()}
        out["forward_all_s"] = runs
        out["tokens"] = len(ids)

        prompt = chat.prompt(checkpoint, "What is attention in a transformer?")
        prompt_ids = checkpoint.encode(prompt)[0]
        generations, cpu = {}, []
        for framework in ("torch", "tensorflow"):
            seconds = timed(lambda fw=framework: generations.setdefault(
                fw, checkpoint.generate(prompt, fw, max_new_tokens=20, temperature=0)), cpu)  # fmt: skip
            out[f"generate_{framework}_s"] = seconds

        def transformers_generate():
            with torch.inference_mode():
                generations["transformers"] = hf.generate(
                    torch.tensor([prompt_ids]), max_new_tokens=20, do_sample=False, eos_token_id=None
                )[0].tolist()

        out["generate_transformers_s"] = timed(transformers_generate, cpu)
        out["generate_cpu_s"] = dict(zip(("torch", "tensorflow", "transformers"), cpu, strict=True))
        hf_ids = generations.pop("transformers")
        out["generated_same"] = {fw: g.output.ids == hf_ids for fw, g in generations.items()}
        out["generated_text"] = checkpoint.tokenizer.decode(generations["torch"].new_ids)
        out["prompt_tokens"] = len(prompt_ids)
        out["checkpoint_mb"] = checkpoint.nbytes / 2**20
    out["load_after"] = os.getloadavg()
    out["machine"] = machine(threads)
    out["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return out


def machine(threads: int) -> str:
    import tensorflow as tf
    import torch
    import transformers

    cpu = "unknown CPU"
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    return (
        f"{cpu}, {os.cpu_count()} cores visible; Python {platform.python_version()}, torch {torch.__version__} "
        f"and tensorflow {tf.__version__} on {threads} intra-op thread{'s' * (threads > 1)} each, "
        f"transformers {transformers.__version__}"
    )


def table(r: dict) -> str:
    f, fc, g = r["forward_s"], r["forward_cpu_s"], r["generate_cpu_s"]
    load = lambda values: " / ".join(f"{v:.1f}" for v in values)  # noqa: E731
    n, p = r["tokens"], r["prompt_tokens"]
    lines = [
        f"Measured {r['date']} on {r['machine']}.",
        f"Load average (1 / 5 / 15 min) before: {load(r['load_before'])}, after: {load(r['load_after'])}. The "
        "machine is shared with other work: wall times include waiting for a core and vary from run to run; "
        "CPU times (this process, all threads) do not. Ratios are taken in one run, interleaved, median of "
        f"{len(r['forward_all_s']['torch'])}.",
        "",
        "| what | wall | CPU | ratio to transformers (wall / CPU) | target |",
        "|---|---|---|---|---|",
        f"| first load: GGUF → safetensors cache ({r['checkpoint_mb']:.0f} MiB float32) | {r['first_load_s']:.2f} s "
        f"| {r['first_load_cpu_s']:.2f} s | | |",
        f"| warm load: `pretrained.load`, cache already converted | {r['warm_load_s']:.2f} s "
        f"| {r['warm_load_cpu_s']:.2f} s | | well under 1 s |",
        f"| first PyTorch run (model built) | {r['build_torch_s']:.2f} s | | | |",
        f"| first TensorFlow run (model built) | {r['build_tensorflow_s']:.2f} s | | | |",
        f"| forward, {n} tokens, all attentions: transformers eager `LlamaForCausalLM` | {f['transformers'] * 1e3:.0f} ms "
        f"| {fc['transformers'] * 1e3:.0f} ms | 1 / 1 | |",
    ]
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        wall, cpu = f[fw] / f["transformers"], fc[fw] / fc["transformers"]
        verdict = (
            "met" if max(wall, cpu) <= TARGETS[fw] else "met in CPU time" if cpu <= TARGETS[fw] else "not met"
        )
        lines.append(f"| forward, {n} tokens, all attentions: {label} | {f[fw] * 1e3:.0f} ms | {fc[fw] * 1e3:.0f} ms "
                     f"| {wall:.2f}× / {cpu:.2f}× | ≤ {TARGETS[fw]}× ({verdict}) |")  # fmt: skip
    t = r["generate_transformers_s"]
    lines.append(f"| 20 new tokens after a {p}-token chat prompt: transformers `generate` (KV cache) | {t:.1f} s "
                 f"| {g['transformers']:.1f} s | 1 / 1 | |")  # fmt: skip
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        w = r[f"generate_{fw}_s"]
        lines.append(f"| 20 new tokens: {label} (each a full pass with all attentions) | {w:.1f} s | {g[fw]:.1f} s "
                     f"| {w / t:.2f}× / {g[fw] / g['transformers']:.2f}× | |")  # fmt: skip
    lines += [
        "",
        f"Greedy tokens identical to transformers': {r['generated_same']}. The answer began: "
        f"“{r['generated_text'].strip()}”.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    results = measure(args.repeats, args.threads)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    text = table(results)
    print(text)
    doc = DOC.read_text()
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        DOC.write_text(f"{head}{START}\n{text}\n{END}{rest.split(END, 1)[1]}")


if __name__ == "__main__":
    main()
