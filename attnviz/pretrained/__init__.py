"""Real attention from a pretrained checkpoint, computed by attnviz's own attention.

`load(source)` reads a checkpoint — a local directory with `config.json`,
`model.safetensors` and `tokenizer.json` (or `vocab.txt`), or a Hugging Face
Hub id for users with internet access — with `safetensors` and `tokenizers`;
no model code from elsewhere runs. Every file is checked before a framework
sees it (`CheckpointError` names the file and the field). `Checkpoint.run`
then runs the whole model with every layer's attention computed by attnviz's
`MultiHeadAttention`: a BERT-family encoder (Devlin et al., 2019), a
GPT-2-family decoder (Radford et al., 2019) or a model saved by the Training
lab, with head ablation and patching, the residual stream (`hidden_states`,
`logit_lens`) and one layer's steps recorded for the neuron view.

What a visitor of the app may load is narrower: `choices()` (packaged
checkpoints, the folders under `ATTNVIZ_CHECKPOINTS`, Hub ids only with
`ATTNVIZ_ALLOW_HUB=1`) through `load_choice`; see docs/checkpoints.md.

The files, one job each:
    files.py     reading config.json / model.safetensors / the tokenizer; `CheckpointError`
    families/    one `Family` row per model_type (__init__.py: config parser, tensor table, model class,
                 layout); config.py config.json → `ModelConfig` (BERT, GPT-2), every field checked;
                 llama.py the Llama family (SmolLM2); gemma.py the Gemma 3 family (Gemma 3 270M);
                 lab.py the Training lab's saved models (`model_type: "attnviz-training"`);
                 layouts.py each decoder family's parts (norms, MLP, positions, heads) as a `DecoderLayout`
    gguf.py      a GGUF file converted once into a folder; gemma_tokenizer.py Gemma's tokenizer from it
    model.py     `Checkpoint`: run, ablate, patch, logit lens, importance, generate
    edits.py     changes to the attention for one run (edited rows, a narrower window), checked
    checks.py    the checks on `run`'s arguments
    sampling.py  next-token probabilities, `Generation`; how far two runs' outputs are apart
    sources.py   packaged / folders / Hub, `load`, `choices`, `load_choice`
    loaded.py    the loaded checkpoints kept in memory (a bounded cache)
    budget.py    peak memory of a request, estimated before it runs
"""

from attnviz.backends.common import ABLATIONS
from attnviz.pretrained.checks import MAX_TEXT_CHARS
from attnviz.pretrained.families import FAMILIES, Family, parse_config
from attnviz.pretrained.families.config import ACTIVATIONS, MAX_LAYERS, EncoderConfig, ModelConfig
from attnviz.pretrained.files import (
    CONFIG,
    MAX_ABS_VALUE,
    MAX_CONFIG_BYTES,
    TOKENIZER,
    TOKENIZER_CONFIG,
    VOCAB,
    WEIGHTS,
    CheckpointError,
    read_json,
)
from attnviz.pretrained.loaded import CACHE, CACHE_MB, ENV_CACHE_MB
from attnviz.pretrained.model import SPECIAL_TOKENS, Checkpoint, EncoderOutput, ModelOutput, without_special
from attnviz.pretrained.sampling import (
    MAX_NEW_TOKENS,
    TEMPERATURE,
    Generation,
    next_token_probabilities,
    softmax_rows,
)
from attnviz.pretrained.sources import (
    ENV_DIRS,
    ENV_HUB,
    ENV_HUB_MAX_MB,
    HUB_ID,
    HUB_MAX_MB,
    MAX_SOURCE_CHARS,
    PACKAGED,
    Packaged,
    canonical_source,
    choices,
    hub_allowed,
    hub_max_bytes,
    load,
    load_choice,
    local_checkpoints,
    not_installed,
    notice,
    open_directory,
    packaged_path,
    read_config,
    speech_choices,
)

__all__ = [
    "ABLATIONS",
    "ACTIVATIONS",
    "CACHE",
    "CACHE_MB",
    "CONFIG",
    "ENV_CACHE_MB",
    "ENV_DIRS",
    "ENV_HUB",
    "ENV_HUB_MAX_MB",
    "FAMILIES",
    "HUB_ID",
    "HUB_MAX_MB",
    "MAX_ABS_VALUE",
    "MAX_CONFIG_BYTES",
    "MAX_LAYERS",
    "MAX_NEW_TOKENS",
    "MAX_SOURCE_CHARS",
    "MAX_TEXT_CHARS",
    "PACKAGED",
    "SPECIAL_TOKENS",
    "TEMPERATURE",
    "TOKENIZER",
    "TOKENIZER_CONFIG",
    "VOCAB",
    "WEIGHTS",
    "Checkpoint",
    "CheckpointError",
    "EncoderConfig",
    "EncoderOutput",
    "Family",
    "Generation",
    "ModelConfig",
    "ModelOutput",
    "Packaged",
    "canonical_source",
    "choices",
    "hub_allowed",
    "hub_max_bytes",
    "load",
    "load_choice",
    "local_checkpoints",
    "next_token_probabilities",
    "not_installed",
    "notice",
    "open_directory",
    "packaged_path",
    "parse_config",
    "read_config",
    "read_json",
    "softmax_rows",
    "speech_choices",
    "without_special",
]
