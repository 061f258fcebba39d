"""Gemma's SentencePiece tokenizer rebuilt from a GGUF file's vocabulary, with `tokenizers` alone.

A Gemma GGUF (llama.cpp's `tokenizer.ggml.model` "llama") stores the 262,144 pieces, their
scores and types, but no merges. The tokenizer is rebuilt as transformers' own GGUF loading
builds it (`integrations/gguf/gguf_tokenizer_mapping.py`, `gemma_tokenizer`, with `GemmaTokenizer`'s
pipeline), so that both give the same ids:

- pieces of two or more spaces are respelled with "▁" (SentencePiece's space);
- the merges are every split of a piece into two pieces of the vocabulary, ordered by the
  merged piece's position in the file (Gemma's scores do not follow its merge order), then by the
  longer left part (transformers' `generate_merges`);
- a BPE model with byte fallback, spaces replaced by "▁", no prefix space; control pieces
  (`<bos>`, `<start_of_turn>` …) added as special tokens, user-defined ones as plain added tokens;
- `<bos>` put before every text, as the tokenizer transformers builds adds it.
"""

from __future__ import annotations

from attnviz.pretrained.files import CheckpointError

SPACE = "\u2581"  # SentencePiece's "▁"
CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types


def merges(tokens: list[str]) -> list[tuple[str, str]]:
    """Each piece's splits into two pieces of the vocabulary, best first (see the module docstring)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    position = {t: -i for i, t in enumerate(tokens)}  # the score transformers sorts by
    found = []
    for piece, score in position.items():
        splits = [
            (piece[:k], piece[k:], score)
            for k in range(1, len(piece))
            if piece[:k] in vocab and piece[k:] in vocab
        ]
        splits.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        found.extend(splits)
    found.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in found]


def gemma_tokenizer(meta: dict):
    """The tokenizer in a Gemma GGUF's metadata, as a `tokenizers.Tokenizer` that adds `<bos>`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tokens = list(meta.get("tokenizer.ggml.tokens") or [])
    types = list(meta.get("tokenizer.ggml.token_type") or [])
    bos = meta.get("tokenizer.ggml.bos_token_id")
    if not tokens or len(types) != len(tokens) or not isinstance(bos, int) or not 0 <= bos < len(tokens):
        raise CheckpointError(
            "GGUF metadata",
            "tokenizer.ggml.tokens",
            "an incomplete vocabulary",
            "tokens, their types and a <bos> id",
        )
    tokens = [SPACE * len(t) if " " in t and not t.strip() else t for t in tokens]
    vocab = {t: i for i, t in enumerate(tokens)}
    unk = meta.get("tokenizer.ggml.unknown_token_id", 3)
    bpe = models.BPE(
        vocab, merges(tokens), fuse_unk=True, unk_token=tokens[unk], byte_fallback=True, dropout=None
    )
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    kinds = list(zip(tokens, types, strict=True))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in kinds if k == CONTROL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, k in kinds if k == USER_DEFINED])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{tokens[bos]} $A", pair=f"{tokens[bos]} $A $B", special_tokens=[(tokens[bos], bos)]
    )
    return tok
