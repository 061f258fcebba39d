"""Train a tiny transformer live, in PyTorch or TensorFlow, and watch its heads form.

The model (`attnviz.backends.torch_backend.train` / `tf_backend.train`, twins line for line):
token + position embeddings, then `n_layers` × [attnviz's own
`MultiHeadAttention`, residual + LayerNorm, optional ReLU MLP with residual +
LayerNorm] (post-LN, as in Vaswani et al., 2017), then an unembedding to
`vocab` logits. Both frameworks start from the same numpy weights
(`init_params`) and see the same numpy batches (`Batches`), so in float64
with plain SGD — or attnviz's Adam, written identically in both — their loss
curves agree to about 1e-15 (docs/training.md).

Tasks (inputs are `seq_len` tokens in `0 .. vocab-1`; position i predicts):
- copy: token i. reverse: token T−1−i. sort: the i-th smallest token.
- induction: random tokens in which a span of m distinct tokens occurs twice
  (m, both places and the gap drawn per sequence, so no fixed position or
  distance gives the answer); position i predicts token i+1 (next-token
  prediction with a causal mask). Loss and accuracy count predictions inside
  the second copy only, the part an induction head can predict (Olsson et
  al., 2022, "In-context learning and induction heads").

Held-out: sequences whose hash falls in one bucket of 64 (`held_out_rows`)
are never used for training; the held-out accuracy is measured on them.

Shapes: N probe sequences, L layers, H heads, T sequence length.

One file per job: `config` (presets, the snapshot and probe caps, threads), `data` (batches,
probes), `history` (`TrainingRun`), `loop` (`Trainer`, `train`), `limits` (what one server allows;
the app trains in a worker process), `schedule` (`train`: frameworks side by side, what the
lab runs in a worker), `save` (runs saved on this server for the Pretrained page,
which reads them back: `attnviz.pretrained.load`). The model's own description — `TrainConfig`, its
weights (`param_shapes`, `init_params`) — is its model family, `attnviz.pretrained.families.lab`, and
the pattern scores a snapshot keeps are interpretability's (`attnviz.interp.scores`); both are
re-exported here.
"""

from attnviz.interp.scores import (
    SCORES,
    diagonal_score,
    entropy,
    induction_score,
    mirror_score,
    pattern_scores,
    previous_token_score,
)
from attnviz.pretrained.families.lab import (
    DTYPES,
    LIMITS,
    LR_MAX,
    MODEL_TYPE,
    OPTIMIZERS,
    PARAM_MAX,
    TASKS,
    TrainConfig,
    check_params,
    init_params,
    param_shapes,
)
from attnviz.training.config import (
    HELD_OUT_BUCKETS,
    HELD_OUT_SIZE,
    MAX_SNAPSHOTS,
    MAX_THREADS,
    PRESETS,
    PROBE_SIZE,
    SNAPSHOT_BUDGET,
    check_budget,
    check_threads,
)
from attnviz.training.data import (
    Batch,
    Batches,
    held_out,
    held_out_rows,
    induction_halves,
    induction_probe,
    make_batch,
    probe,
    sample,
)
from attnviz.training.history import (
    TrainingRun,
)
from attnviz.training.limits import (
    Size,
    TrainLimits,
    check_size,
    estimate,
)
from attnviz.training.loop import (
    Trainer,
    steps_per_second,
    train,
    trainer_module,
)
from attnviz.training.save import (
    SHARED_DIR,
    owner_of,
    session_checkpoint,
    session_checkpoints,
    share,
)

__all__ = [
    "DTYPES",
    "HELD_OUT_BUCKETS",
    "HELD_OUT_SIZE",
    "LIMITS",
    "LR_MAX",
    "MAX_SNAPSHOTS",
    "MAX_THREADS",
    "MODEL_TYPE",
    "OPTIMIZERS",
    "PARAM_MAX",
    "PRESETS",
    "PROBE_SIZE",
    "SCORES",
    "SHARED_DIR",
    "SNAPSHOT_BUDGET",
    "TASKS",
    "Batch",
    "Batches",
    "Size",
    "TrainConfig",
    "TrainLimits",
    "Trainer",
    "TrainingRun",
    "check_budget",
    "check_params",
    "check_size",
    "check_threads",
    "diagonal_score",
    "entropy",
    "estimate",
    "held_out",
    "held_out_rows",
    "induction_halves",
    "induction_probe",
    "induction_score",
    "init_params",
    "make_batch",
    "mirror_score",
    "owner_of",
    "param_shapes",
    "pattern_scores",
    "previous_token_score",
    "probe",
    "sample",
    "session_checkpoint",
    "session_checkpoints",
    "share",
    "steps_per_second",
    "train",
    "trainer_module",
]
