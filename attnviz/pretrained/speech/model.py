"""A loaded speech model and what it does: transcribe a clip, greedily, as OpenAI's Whisper does
for an English-only model (`whisper/decoding.py`): the start tokens `<|startoftranscript|>
<|notimestamps|>`, then at each step the most likely token with `config.json`'s `suppress_ids`
never and its `suppress_ids_begin` not first, until `<|endoftext|>` or 224 tokens. The encoder
runs once per clip; the decoder one step per token over its cache.

Shapes: L layers, H heads, T decoder rows (the start tokens, each generated token, the end token),
S audio positions (1500), n text tokens, M mel bands, N mel frames.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnviz.audio import HOP, SAMPLE_RATE, Audio, log_mel, read_wav
from attnviz.errors import SpecError
from attnviz.frameworks import backend, check_framework
from attnviz.pretrained.families import Family
from attnviz.pretrained.families.whisper import WhisperConfig, attention_params
from attnviz.pretrained.speech.timing import Word, alignment_matrix, token_starts, words_of

START, NO_TIMESTAMPS, END = "<|startoftranscript|>", "<|notimestamps|>", "<|endoftext|>"
MAX_NEW_TOKENS = 224  # Whisper's sample_len: half the decoder's 448 positions


@dataclass(frozen=True)
class Transcript:
    """What `SpeechCheckpoint.transcribe` returns.

    Attributes:
        ids: the text tokens generated (no start tokens, no end token), `(n,)`.
        text: those tokens decoded.
        tokens: every decoder row's token as text: the start tokens, the text tokens, then
            `<|endoftext|>` when the model ended the text (not when 224 tokens ran out).
        cross_attentions: `(L, H, T, S)`, row t: token `tokens[t]` reading the encoder's positions.
        self_attentions: `(L, H, T, T)`, the decoder's causal self-attention.
        encoder_attentions: `(L, H, n, n)` among the first n audio positions when asked for (n =
            `transcribe`'s `encoder_attentions`), else None.
        token_times: each text token's start in seconds, `(n,)`; token_ends: each one's end.
        words: the words with their spans (`timing.Word`).
        alignment_heads: the `(layer, head)` pairs the times were read from.
        n_start: how many start tokens lead `tokens`. seconds: the clip's length (at most 30).
        framework: "torch" or "tensorflow".
    """

    ids: list[int]
    text: str
    tokens: list[str]
    cross_attentions: np.ndarray
    self_attentions: np.ndarray
    encoder_attentions: np.ndarray | None
    token_times: np.ndarray
    token_ends: np.ndarray
    words: list[Word]
    alignment_heads: tuple[tuple[int, int], ...]
    n_start: int
    seconds: float
    framework: str


def _rows(parts: list[np.ndarray]) -> np.ndarray:
    """Each step's self-attention `(L, H, n, Lk)` → `(L, H, T, T)`, each row zero after its keys."""
    T = sum(p.shape[2] for p in parts)
    out = np.zeros((*parts[0].shape[:2], T, T), dtype=np.float32)
    row = 0
    for p in parts:
        out[:, :, row : row + p.shape[2], : p.shape[3]] = p
        row += p.shape[2]
    return out


class SpeechCheckpoint:
    """A Whisper checkpoint's config, weights (float32, checked), tokenizer and family."""

    def __init__(
        self, name: str, path: Path, config: WhisperConfig, weights: dict, tokenizer, family: Family
    ):
        self.name, self.path, self.config = name, path, config
        self.weights, self.tokenizer, self.family = weights, tokenizer, family
        self.kind = config.kind
        self._models: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.start_ids = [tokenizer.token_to_id(START), tokenizer.token_to_id(NO_TIMESTAMPS)]
        self.end_id = tokenizer.token_to_id(END)

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self.weights.values())

    def attention_params(self, name: str) -> dict[str, np.ndarray]:
        """The attention `name` (a CTranslate2 prefix) in attnviz's `x @ W` layout."""
        return attention_params(self.weights, self.config, name)

    def model(self, framework: str):
        """The framework's Whisper with these weights, built once and kept."""
        check_framework(framework)
        with self._lock:
            if framework not in self._models:
                self._models[framework] = self.family.model(backend(framework))(self)
            return self._models[framework]

    def _audio(self, audio: Audio | bytes | str | os.PathLike | np.ndarray) -> np.ndarray:
        if isinstance(audio, Audio):
            return audio.samples
        if isinstance(audio, np.ndarray):
            if audio.ndim != 1 or audio.size == 0 or not np.isfinite(audio).all():
                raise SpecError(
                    "audio",
                    None,
                    "finite 16 kHz mono samples (n,)",
                    value_text=f"an array of shape {audio.shape}",
                )
            return audio.astype(np.float32)
        return read_wav(audio).samples

    def transcribe(
        self,
        audio: Audio | bytes | str | os.PathLike | np.ndarray,
        *,
        framework: str = "torch",
        encoder_attentions: int = 0,
        max_new_tokens: int = MAX_NEW_TOKENS,
    ) -> Transcript:
        """Transcribe `audio` (an `Audio`, a WAV's bytes or path, or 16 kHz samples `(n,)`) greedily.

        `encoder_attentions`: how many audio positions (from the start) of the encoder's
        self-attention to keep, queries and keys: 0 none, 1500 all (216 MB for tiny).

        Raises:
            SpecError: bad audio (see `attnviz.audio.read_wav`), framework or `max_new_tokens`.
        """
        positions = self.config.audio_positions
        if type(encoder_attentions) is not int or not 0 <= encoder_attentions <= positions:
            raise SpecError("encoder_attentions", encoder_attentions, f"an integer from 0 to {positions}")
        if type(max_new_tokens) is not int or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
            raise SpecError("max_new_tokens", max_new_tokens, f"an integer from 1 to {MAX_NEW_TOKENS}")
        samples = self._audio(audio)
        model = self.model(framework)
        memory, encoder = model.encode(log_mel(samples), attentions=encoder_attentions)
        ids, crosses, selves = self._greedy(model, model.start(memory), max_new_tokens)
        cross = np.concatenate(crosses, axis=2)  # (L, H, T, S)
        frames = max(1, len(samples) // (2 * HOP))  # audio positions of the clip (20 ms each)
        matrix = alignment_matrix(cross, self.config.alignment_heads, frames)  # (T, frames)
        times = token_starts(matrix, len(self.start_ids), len(ids))
        pieces = [self.tokenizer.decode([i]) for i in ids]
        rows = (
            self.start_ids + ids + ([self.end_id] if cross.shape[2] > len(self.start_ids) + len(ids) else [])
        )
        return Transcript(
            ids,
            self.tokenizer.decode(ids).strip(),
            [self.tokenizer.decode([i], skip_special_tokens=False) for i in rows],
            cross,
            _rows(selves),
            encoder,
            times[: len(ids)],
            times[1 : len(ids) + 1],
            words_of(pieces, times),
            self.config.alignment_heads,
            len(self.start_ids),
            len(samples) / SAMPLE_RATE,
            framework,
        )

    def _greedy(self, model, state, max_new_tokens: int) -> tuple[list[int], list, list]:
        """The text tokens, and each step's cross- and self-attention rows (the end token's too)."""
        suppress, begin = list(self.config.suppress_ids), list(self.config.suppress_begin)
        logits, cross, own = model.step(self.start_ids, state)
        ids, crosses, selves = [], [cross], [own]
        while len(ids) < max_new_tokens:
            logits[suppress] = -np.inf
            if not ids:
                logits[begin] = -np.inf
            token = int(np.argmax(logits))
            logits, cross, own = model.step([token], state)  # the end token's rows time the last word
            crosses.append(cross)
            selves.append(own)
            if token == self.end_id:
                break
            ids.append(token)
        return ids, crosses, selves
