"""Time Whisper tiny.en on a 5-second clip (issue 43) and write the figures into docs/whisper.md.

    python benchmarks/whisper_bench.py --repeats 5

What is timed, in this one process, each a median of `--repeats`, the engines interleaved, on
`--threads` intra-op threads (the same for every engine): the whole transcription of
`assets/speech/lesson.wav` (5.4 s of espeak-ng speech) from its 16 kHz samples to the tokens —
- attnviz PyTorch and TensorFlow: `SpeechCheckpoint.transcribe` (log-mel, encoder, greedy decoding
  with every cross- and self-attention row kept, word timing);
- transformers' eager `WhisperForConditionalGeneration.generate` on the same weights
  (`transformers_names`), its own `WhisperFeatureExtractor` first, no attentions returned;
- CTranslate2's own `Whisper.generate` on the same `model.bin` (float32), if ctranslate2 is
  installed, transformers' features first.
The tokens are compared. CPU time (this process) is recorded beside wall time: on a shared machine
the wall time includes waiting for a core. The machine's load average is written beside the figures.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))

from attnviz import pretrained  # noqa: E402
from attnviz.audio import read_wav  # noqa: E402
from attnviz.pretrained.families.whisper import transformers_config, transformers_names  # noqa: E402
from benchmarks.doc_section import markers, write_section  # noqa: E402

CLIP = ROOT / "assets" / "speech" / "lesson.wav"
DOC = ROOT / "docs" / "whisper.md"
SECTION = markers("whisper_bench")


def transformers_model(checkpoint):
    import torch
    import transformers

    cfg = checkpoint.config
    config = transformers.WhisperConfig(**transformers_config(cfg))
    model = transformers.WhisperForConditionalGeneration(config).eval()
    state = {k: torch.from_numpy(v) for k, v in transformers_names(checkpoint.weights, cfg).items()}
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    extractor = transformers.WhisperFeatureExtractor()

    def run(samples):
        features = extractor(samples, sampling_rate=16_000, return_tensors="pt").input_features
        with torch.inference_mode():
            out = model.generate(
                features,
                decoder_input_ids=torch.tensor([checkpoint.start_ids]),
                max_new_tokens=224,
                max_length=None,
                suppress_tokens=list(cfg.suppress_ids),
                begin_suppress_tokens=list(cfg.suppress_begin),
                eos_token_id=checkpoint.end_id,
                pad_token_id=checkpoint.end_id,
                do_sample=False,
                num_beams=1,
            )
        ids = [i for i in out[0].tolist() if i not in checkpoint.start_ids]  # with or without the prompt
        return ids[: ids.index(checkpoint.end_id)] if checkpoint.end_id in ids else ids

    return run


def ctranslate2_model(checkpoint, threads: int):
    try:
        import ctranslate2
    except ImportError:
        return None
    import transformers

    model = ctranslate2.models.Whisper(
        str(checkpoint.path), device="cpu", compute_type="float32", intra_threads=threads
    )
    extractor = transformers.WhisperFeatureExtractor()

    def run(samples):
        features = extractor(samples, sampling_rate=16_000, return_tensors="np").input_features
        result = model.generate(
            ctranslate2.StorageView.from_array(features),
            [checkpoint.start_ids],
            beam_size=1,
            max_length=224 + 2,
        )
        return [i for i in result[0].sequences_ids[0] if i != checkpoint.end_id]

    return run, ctranslate2.__version__


def timed(run, samples) -> tuple[float, float, list[int]]:
    wall, cpu = time.perf_counter(), time.process_time()
    ids = run(samples)
    return time.perf_counter() - wall, time.process_time() - cpu, ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/whisper.md")
    args = parser.parse_args()

    import tensorflow as tf
    import torch

    torch.set_num_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    checkpoint = pretrained.load("whisper-tiny.en")
    samples = read_wav(CLIP).samples
    engines = {
        "attnviz PyTorch": lambda s: checkpoint.transcribe(s, framework="torch").ids,
        "attnviz TensorFlow": lambda s: checkpoint.transcribe(s, framework="tensorflow").ids,
        "transformers eager generate": transformers_model(checkpoint),
    }
    ct2 = ctranslate2_model(checkpoint, args.threads)
    if ct2 is not None:
        engines[f"CTranslate2 {ct2[1]} (float32)"] = ct2[0]
    for run in engines.values():
        run(samples)  # warm-up: models built, graphs traced
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    times = {name: [] for name in engines}
    ids = {}
    for _ in range(args.repeats):
        for name, run in engines.items():
            wall, cpu, ids[name] = timed(run, samples)
            times[name].append((wall, cpu))
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    base = statistics.median(w for w, _ in times["transformers eager generate"])
    same = {name: ids[name] == ids["attnviz PyTorch"] for name in engines}
    lines = [
        f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC on this shared 2-core machine "
        f"(load average {' '.join(load_before)} before, {' '.join(load_after)} after: other engineers' work "
        f"was running), {args.threads} thread(s) per engine, median of {args.repeats}, clip "
        f"`{CLIP.relative_to(ROOT)}` ({len(samples) / 16000:.1f} s, {len(ids['attnviz PyTorch'])} tokens).",
        "",
        "| engine | wall (median) | CPU (median) | × transformers | same tokens as attnviz PyTorch |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name in engines:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        lines.append(
            f"| {name} | {wall:.2f} s | {cpu:.2f} s | {wall / base:.2f}× | {'yes' if same[name] else 'no'} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if not args.no_write:
        write_section(DOC, table, *SECTION)


if __name__ == "__main__":
    main()
