"""Measure SmolLM2-135M-Instruct through attnviz (issue 17 §4) and write the figures into docs/llama.md.

    nice -n 5 python benchmarks/llama_bench.py          # ~3–10 minutes, depending on the machine's load
    python benchmarks/llama_bench.py --repeats 3        # quicker, noisier

What is timed, each in this one process, with the machine's load average before and after:
- first load: the GGUF converted into a fresh cache folder (dequantise, un-permute, write);
- warm load: `pretrained.load` of the converted folder (checkpoint cache emptied first);
- a forward pass over 32 tokens returning every layer's attention: attnviz PyTorch and TensorFlow
  against transformers' eager `LlamaForCausalLM` on the same weights (read from the converted
  folder), interleaved, median of `--repeats`; ratios side by side;
- 20 generated tokens (greedy, the chat template applied), interleaved, median of `--gen-repeats`:
  attnviz's `generate` with its KV cache (the default: the prompt once, then one position per
  token; then one full pass with every attention, which the page draws) in PyTorch and TensorFlow
  against transformers' eager `generate` (its own KV cache); that final full pass timed alone; and
  once each, attnviz without the cache (`cache=False`: every token a full pass), unless `--quick`.

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "llama.md"
RESULTS = ROOT / "test-artifacts" / "llama-bench.json"
START, END = "<!-- llama_bench:start -->", "<!-- llama_bench:end -->"
sys.path.insert(0, str(ROOT))
from benchmarks.doc_section import write_section  # noqa: E402

NAME = "SmolLM2-135M-Instruct"
TEXT = (
    "Attention lets every token look at the tokens before it; rotary embeddings turn queries and keys "
    "by their position, and grouped heads share keys and values between several queries."
)
TARGETS = {"torch": 1.5, "tensorflow": 2.5}  # a 32-token forward
GENERATE_TARGETS = {"torch": 1.3, "tensorflow": 2.5}  # 20 new tokens, cached


def timed(fn, cpu: list | None = None) -> float:
    """Wall seconds of `fn()`; its CPU seconds (all threads of this process) appended to `cpu`."""
    start, start_cpu = time.perf_counter(), time.process_time()
    fn()
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    return time.perf_counter() - start


def measure(repeats: int, threads: int, gen_repeats: int, uncached: bool) -> dict:
    import torch
    import transformers

    from attnviz import pretrained
    from attnviz.frameworks import backend
    from attnviz.pretrained import chat, gguf

    for framework in ("torch", "tensorflow"):  # as the app does (ATTNVIZ_THREADS), before either runs
        backend(framework).set_threads(threads)
    out = {"load_before": os.getloadavg(), "uptime_before": uptime(), "threads": threads}
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
        generations = {}

        def transformers_generate():
            with torch.inference_mode():
                generations["transformers"] = hf.generate(
                    torch.tensor([prompt_ids]), max_new_tokens=20, do_sample=False, eos_token_id=None
                )[0].tolist()

        def attnviz_generate(framework: str, cache: bool = True):
            generations[framework] = checkpoint.generate(prompt, framework, 20, temperature=0, cache=cache)

        for framework in ("torch", "tensorflow"):  # warm: each framework's first cached step
            checkpoint.generate(prompt, framework, 2, temperature=0)
        gen = {"transformers": [], "torch": [], "tensorflow": []}
        gen_cpu = {name: [] for name in gen}
        for _ in range(gen_repeats):  # interleaved, as the forward passes
            gen["transformers"].append(timed(transformers_generate, gen_cpu["transformers"]))
            for fw in ("torch", "tensorflow"):
                gen[fw].append(timed(lambda fw=fw: attnviz_generate(fw), gen_cpu[fw]))
        out["generate_all_s"] = gen
        for name in gen:
            out[f"generate_{name}_s"] = statistics.median(gen[name])
        out["generate_cpu_s"] = {k: statistics.median(v) for k, v in gen_cpu.items()}
        hf_ids = generations.pop("transformers")
        out["generated_same"] = {fw: g.output.ids == hf_ids for fw, g in generations.items()}
        out["generated_text"] = checkpoint.tokenizer.decode(generations["torch"].new_ids)
        out["cache_bytes"] = generations["torch"].cache_bytes
        final_cpu = []
        for fw in ("torch", "tensorflow"):  # the full pass over the final text that `generate` ends with
            timed(lambda fw=fw: checkpoint.run_ids(hf_ids, fw), final_cpu)
        out["final_run_cpu_s"] = dict(zip(("torch", "tensorflow"), final_cpu, strict=True))
        if uncached:
            cpu = []
            for fw in ("torch", "tensorflow"):
                out[f"uncached_{fw}_s"] = timed(lambda fw=fw: attnviz_generate(fw, cache=False), cpu)
            out["uncached_cpu_s"] = dict(zip(("torch", "tensorflow"), cpu, strict=True))
        out["prompt_tokens"] = len(prompt_ids)
        out["checkpoint_mb"] = checkpoint.nbytes / 2**20
    out["load_after"] = os.getloadavg()
    out["uptime_after"] = uptime()
    out["machine"] = machine(threads)
    out["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return out


def uptime() -> str:
    """`uptime`'s line: the machine's load when measured."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


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
    t, tc = r["generate_transformers_s"], g["transformers"]
    lines.append(f"| 20 new tokens after a {p}-token chat prompt: transformers eager `generate` (KV cache) "
                 f"| {t:.1f} s | {tc:.2f} s | 1 / 1 | |")  # fmt: skip
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        w, c, target = r[f"generate_{fw}_s"], g[fw], GENERATE_TARGETS[fw]
        verdict = (
            "met" if max(w / t, c / tc) <= target else "met in CPU time" if c / tc <= target else "not met"
        )
        lines.append(f"| 20 new tokens: {label} `generate` (KV cache; then one full pass with every attention "
                     f"for the page, {r['final_run_cpu_s'][fw]:.2f} s CPU of it) | {w:.1f} s | {c:.2f} s "
                     f"| {w / t:.2f}× / {c / tc:.2f}× | ≤ {target}× ({verdict}) |")  # fmt: skip
    for fw, label in (("torch", "attnviz PyTorch"), ("tensorflow", "attnviz TensorFlow")):
        if f"uncached_{fw}_s" in r:
            w, c = r[f"uncached_{fw}_s"], r["uncached_cpu_s"][fw]
            lines.append(f"| 20 new tokens: {label}, `cache=False` (each a full pass), once | {w:.1f} s "
                         f"| {c:.2f} s | {w / t:.2f}× / {c / tc:.2f}× | |")  # fmt: skip
    lines += [
        "",
        f"Greedy tokens identical to transformers': {r['generated_same']}. The answer began: "
        f"“{r['generated_text'].strip()}”. The KV cache at the end held {r['cache_bytes'] / 2**20:.2f} MiB "
        f"(30 layers × K and V × 3 K/V heads × 64 × float32 per position: 3× less than 9 heads would hold). "
        f"Generation: median of {len(r['generate_all_s']['torch'])}, interleaved. `uptime` before: "
        f"`{r['uptime_before']}`; after: `{r['uptime_after']}`.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gen-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the uncached generations")
    args = parser.parse_args()
    results = measure(args.repeats, args.threads, args.gen_repeats, not args.quick)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    text = table(results)
    print(text)
    write_section(DOC, text, START, END)


if __name__ == "__main__":
    main()
