"""The door against PyTorch's own layer, on the GPU and the CPU (issue 45), written to docs/gpu.md.

Rows per device and length L (8 heads, d_model 512, batch 1, float32, no mask; `--repeats` timed
calls after `--warmup`, medians, the device synchronised):
- **door**: `run_attention(spec, "torch", device, capture=False)` with the spec alone (the door builds
  or reuses the parameters and inputs; NumPy out), against **layer + copy home**: PyTorch's
  `nn.MultiheadAttention(need_weights=True, average_attn_weights=False)` on the same device with
  its output and per-head weights copied to the host (through pinned memory from a GPU). Target ≤ 1.5×.
- **door, arrays given**: the same with `x_q` and `params` passed as NumPy, against the **layer
  alone** (no copy home).
- **capture**: `capture=True`, and **capture + a read**: the same with one step's value read (what a
  page draws), against the door. Target ≤ 1.3×.
With `--models`, SmolLM2-135M (the packaged GGUF): 20 greedy tokens and the patching sweep with
`device=`, against the same on the CPU and transformers' greedy generation on the same device.

Usage (on a GPU machine: PyTorch and NumPy are enough for the attention rows; `--models` needs
transformers, accelerate, gguf and the packaged SmolLM2, as README's install line puts it):
  python benchmarks/gpu_bench.py --devices gpu cpu [--lengths 512 1024 2048 4096] [--models]
benchmarks/gpu_check.sh runs it at short settings beside the library's GPU tests (docs/gpu.md).
The section between the markers in `--out` is replaced; the rest of the file is kept.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import torch

from attnviz import AttentionSpec, init_params, make_inputs, run_attention
from attnviz.backends import torch_backend
from benchmarks.doc_section import markers, write_section

BEGIN, END = markers("gpu_bench")
HEADS, D_MODEL = 8, 512


def medians_ms(fns: dict, dev: torch.device, warmup: int, repeats: int) -> dict[str, float]:
    """Median wall milliseconds of each of `fns` over `repeats` rounds after `warmup`, the device
    synchronised. Each round runs every function once, in turn: a burst of load on this shared machine
    hits them alike, so their ratios hold better than their milliseconds."""
    times = {name: [] for name in fns}
    for i in range(warmup + repeats):
        for name, fn in fns.items():
            torch_backend.sync(dev)
            start = time.perf_counter()
            fn()
            torch_backend.sync(dev)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}


def home(t: torch.Tensor) -> np.ndarray:
    """A tensor copied to the host as NumPy: through pinned memory from a GPU (the fast copy)."""
    if t.device.type != "cuda":
        return t.numpy()
    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    host.copy_(t)
    return host.numpy()


def torch_layer(spec: AttentionSpec, params: dict, dev: torch.device) -> torch.nn.MultiheadAttention:
    """PyTorch's own layer holding attnviz's parameters (so the two compute the same numbers)."""
    mha = torch.nn.MultiheadAttention(spec.d_model, spec.n_heads, batch_first=True).to(dev).eval()
    t = lambda a: torch.from_numpy(a.T.copy())  # noqa: E731  x @ W → Linear (out, in)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([t(params[f"W_{k}"]) for k in "qkv"]))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([params[f"b_{k}"] for k in "qkv"])))
        mha.out_proj.weight.copy_(t(params["W_o"]))
        mha.out_proj.bias.copy_(torch.from_numpy(params["b_o"]))
    return mha


def attention_row(device: str, length: int, warmup: int, repeats: int) -> dict:
    dev = torch_backend.resolve_device(device)
    spec = AttentionSpec(len_q=length, n_heads=HEADS, d_model=D_MODEL)
    params, (x, _) = init_params(spec), make_inputs(spec)
    mha = torch_layer(spec, params, dev)
    tx = torch.from_numpy(x).to(dev)
    big = {"memory_budget": float("inf")}

    def layer():
        with torch.inference_mode():
            return mha(tx, tx, tx, need_weights=True, average_attn_weights=False)

    def layer_home():
        out, weights = layer()
        return home(out), home(weights)

    def capture_read():
        run_attention(spec, "torch", device, **big).step("softmax").value  # noqa: B018

    ours = run_attention(spec, "torch", device, capture=False, **big)
    theirs = layer_home()
    gap = max(float(np.abs(ours.output - theirs[0]).max()), float(np.abs(ours.weights - theirs[1]).max()))
    fns = {
        "door": lambda: run_attention(spec, "torch", device, capture=False, **big),
        "layer_home": layer_home,
        "given": lambda: run_attention(spec, "torch", device, x_q=x, params=params, capture=False, **big),
        "layer": layer,
        "capture": lambda: run_attention(spec, "torch", device, **big),
        "capture_read": capture_read,
    }
    return {
        "device": torch_backend.device_name(dev),
        "L": length,
        **medians_ms(fns, dev, warmup, repeats),
        "max_diff": gap,
    }


def attention_table(rows: list[dict]) -> str:
    head = (
        "| device | L | door (spec alone) | layer + copy home | door / layer+copy | door, arrays given "
        "| layer alone | capture | capture + a step read | capture+read / door | max abs diff |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['device']} | {r['L']} | {r['door']:.2f} ms | {r['layer_home']:.2f} ms "
        f"| **{r['door'] / r['layer_home']:.2f}×** | {r['given']:.2f} ms | {r['layer']:.2f} ms "
        f"| {r['capture']:.2f} ms | {r['capture_read']:.2f} ms | **{r['capture_read'] / r['door']:.2f}×** "
        f"| {r['max_diff']:.1e} |\n"
        for r in rows
    )
    return head + body


SMOLLM2 = "SmolLM2-135M-Instruct"
PROMPT, NEW_TOKENS = "The capital of France is", 20
CLEAN = "When Mary and John went to the big store, John gave a drink to"
CORRUPTED = "When Mary and John went to the big store, Mary gave a drink to"


def model_row(ckpt, device: str, warmup: int, repeats: int) -> dict:
    """SmolLM2 on `device`: 20 greedy tokens over the KV cache, transformers' own 20, the patching sweep."""
    from attnviz.interp import patching

    dev = torch_backend.resolve_device(device)
    ours = lambda: ckpt.generate(PROMPT, "torch", NEW_TOKENS, temperature=0, device=device)  # noqa: E731
    sweep = lambda: patching.sweep(ckpt, CLEAN, CORRUPTED, " Mary", " John", "torch", device=device)  # noqa: E731
    theirs = transformers_generate(ckpt.encode(PROMPT)[0], dev)
    times = medians_ms({"generate": ours, "transformers": theirs}, dev, warmup, repeats)
    times |= medians_ms({"sweep": sweep}, dev, 1, max(1, repeats // 2))
    return {"device": torch_backend.device_name(dev), **times}


def transformers_generate(ids: list[int], dev: torch.device):
    """transformers' greedy generation of the same GGUF file (its own reader) on `dev`, as a callable."""
    import transformers

    from attnviz import pretrained

    path = pretrained.local_checkpoints()[SMOLLM2]
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    model = model.to(dev).eval()
    prompt = torch.tensor([ids], device=dev)

    def run():
        with torch.inference_mode():
            model.generate(prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)

    return run


def model_table(rows: list[dict]) -> str:
    return (
        "| device | SmolLM2, 20 greedy tokens (attnviz) | transformers, the same | attnviz / transformers "
        "| patching sweep (270 heads) |\n|---|---|---|---|---|\n"
        + "".join(
            f"| {r['device']} | {r['generate']:.0f} ms | {r['transformers']:.0f} ms "
            f"| **{r['generate'] / r['transformers']:.2f}×** | {r['sweep']:.0f} ms |\n"
            for r in rows
        )
    )


def machine() -> str:
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {platform.node()}: {os.cpu_count()} CPU "
        f"cores, {gpu}; Python {platform.python_version()}, PyTorch {torch.__version__}, NumPy "
        f"{np.__version__}; torch threads {torch.get_num_threads()}; load average {' / '.join(load)} "
        "at the end (the machine is shared: figures under load)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", nargs="+", default=["gpu", "cpu"], choices=["gpu", "cpu"])
    ap.add_argument("--lengths", nargs="*", type=int, default=[512, 1024, 2048, 4096])
    ap.add_argument(
        "--cpu-lengths", nargs="+", type=int, default=None, help="lengths on the CPU (default: --lengths)"
    )
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: PyTorch's)")
    ap.add_argument("--models", action="store_true", help="also SmolLM2's generation and patching sweep")
    ap.add_argument(
        "--model-devices",
        nargs="+",
        default=None,
        choices=["gpu", "cpu"],
        help="devices of --models (default: --devices)",
    )
    ap.add_argument("--out", default=str(Path(__file__).parents[1] / "docs" / "gpu.md"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch_backend.configure()  # TF32 off: the numbers the proofs check
    rows = []
    for device in args.devices:
        for length in args.cpu_lengths if device == "cpu" and args.cpu_lengths else args.lengths:
            rows.append(attention_row(device, length, args.warmup, args.repeats))
            print(rows[-1], flush=True)
    text = f"Measured {machine()}.\n\n" + attention_table(rows)
    if args.models:
        from attnviz import pretrained

        ckpt = pretrained.load_choice(SMOLLM2)
        devices = args.model_devices or args.devices
        text += "\n" + model_table([model_row(ckpt, d, args.warmup, args.repeats) for d in devices])
    write_section(args.out, text, BEGIN, END)
    print(text)


if __name__ == "__main__":
    main()
