"""The training row: steps per second of the Training lab's model with attnviz's attention against
the same model built on each framework's own attention layer (issue 12's speed target).

Each measurement builds the model once, makes the batches beforehand, then times
`steps` optimisation steps after `warmup` (`attnviz.training.steps_per_second`);
the row reports the median of `repeats` such measurements, the two
implementations alternating so that a busy moment hits both.
"""

from __future__ import annotations

import statistics

from attnviz.frameworks import installed

IMPLS = ("attnviz", "native")
NATIVE = {"torch": "nn.MultiheadAttention", "tensorflow": "keras.layers.MultiHeadAttention"}


def training_rows(
    config=None, frameworks=None, *, steps: int = 100, warmup: int = 10, repeats: int = 5
) -> list[dict]:
    """One row per framework: steps/s with attnviz's attention and with the framework's own, and their ratio."""
    from attnviz import training

    config = config or training.TrainConfig(
        task="reverse", seq_len=8, vocab=10, n_layers=1, n_heads=1, d_model=32
    )
    rows = []
    for fw in frameworks or installed():
        samples = {impl: [] for impl in IMPLS}
        for _ in range(repeats):
            for impl in IMPLS:
                samples[impl].append(training.steps_per_second(config, fw, impl, steps=steps, warmup=warmup))
        median = {impl: statistics.median(v) for impl, v in samples.items()}
        rows.append(
            {
                "framework": fw,
                "config": config.to_dict(),
                "attnviz_steps_per_s": median["attnviz"],
                "native_steps_per_s": median["native"],
                "native_layer": NATIVE[fw],
                "ratio": median["attnviz"] / median["native"],
                "repeats": repeats,
                "steps": steps,
            }
        )
    return rows


def to_markdown(rows: list[dict]) -> str:
    if not rows:
        return ""
    c = rows[0]["config"]
    lines = [
        f"Training steps per second (task {c['task']}, seq_len {c['seq_len']}, {c['n_layers']} layer × "
        f"{c['n_heads']} head, d_model {c['d_model']}, batch {c['batch']}, {c['optimizer']}; median of "
        f"{rows[0]['repeats']} runs of {rows[0]['steps']} steps, the two models alternating):",
        "",
        "| framework | attnviz (steps/s) | framework's own layer (steps/s) | ratio | target ≥ 0.8 |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['framework']} ({r['native_layer']}) | {r['attnviz_steps_per_s']:.0f} | "
            f"{r['native_steps_per_s']:.0f} | {r['ratio']:.2f} | {'yes' if r['ratio'] >= 0.8 else '**no**'} |"
        )
    return "\n".join(lines) + "\n"
