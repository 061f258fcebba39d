"""Cross-attention in speech: which part of the sound does a word read?

Whisper tiny.en (`attnviz.pretrained`, every attention attnviz's own) transcribes one of the bundled
espeak-ng clips (`assets/speech`, the Speech page's). The student sees the clip's spectrogram and what
the model wrote, and picks, among four spans of the sound, the one a given word reads. The key is the
model's own word timing (`Transcript.words`: the alignment heads' cross-attention, standardised,
median-filtered, averaged, then dynamic time warping, as Whisper times words); the reveal draws that
word's row of the alignment heads' average cross-attention over the spectrogram. A clip is
transcribed once per process and framework (`heard`): a class's seeds share four clips.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from attnviz import formats
from attnviz.audio import HOP, log_mel, read_wav
from attnviz.lessons import checkpoints
from attnviz.lessons.core import CHOICE, Exercise, Link, Part, rng

LESSON = "speech"
MODEL = "whisper-tiny.en"
CLIPS = Path(__file__).parents[3] / "assets" / "speech"  # the Speech page's clips and their texts
SECONDS_PER_POSITION = 0.02  # an encoder position
OPTIONS, LETTERS = 4, "ABCD"
MIN_SECONDS = 0.1  # a word spoken for less is neither asked about nor offered as a span


def clips() -> dict[str, str]:
    """Bundled clip name → the text espeak-ng read (assets/speech/clips.json)."""
    return json.loads((CLIPS / "clips.json").read_text())


@checkpoints.kept
def heard(ckpt, clip: str, framework: str) -> dict:
    """The clip transcribed in `framework`: `transcript` (`Transcript`) and `mel (80, 2P)`, the log-mel
    frames of the clip's P audio positions (10 ms each)."""
    audio = read_wav(CLIPS / f"{clip}.wav")
    P = max(1, -(-len(audio.samples) // (2 * HOP)))  # audio positions that hold the clip
    transcript = ckpt.transcribe(audio, framework=framework)
    return {"transcript": transcript, "mel": log_mel(audio)[:, : 2 * P]}


def word_row(transcript, word, positions: int) -> np.ndarray:
    """`(P,)` the word's cross-attention over the clip's first `positions` audio positions: the rows of
    the decoder steps that wrote its tokens (a token is written by the row of the token before it, the
    last start token's row writing the first), each alignment head's renormalised over those positions,
    then averaged over the heads and the tokens (the rows Whisper's timing aligns)."""
    rows = [transcript.n_start - 1 + i for i in word.tokens]
    picked = np.stack(
        [transcript.cross_attentions[a, h, rows, :positions] for a, h in transcript.alignment_heads]
    )  # (A, tokens, P)
    picked = picked / np.maximum(picked.sum(-1, keepdims=True), 1e-12)
    return picked.mean((0, 1))


def _spoken(words) -> list[int]:
    """The words that are words (letters, not punctuation) spoken for at least `MIN_SECONDS`."""
    return [
        i for i, w in enumerate(words) if any(c.isalpha() for c in w.text) and w.end - w.start >= MIN_SECONDS
    ]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _share(row: np.ndarray, start: float, end: float) -> float:
    """The share of `row`'s weight on the positions that start inside [start, end)."""
    times = np.arange(len(row)) * SECONDS_PER_POSITION
    return float(row[(times >= start - 1e-9) & (times < end - 1e-9)].sum())


def _loudness(mel: np.ndarray, every: float = 0.25) -> tuple[np.ndarray, tuple[str, ...]]:
    """`(R, 1)` the mean log-mel over the bands in slices of `every` seconds, and each slice's label."""
    frames = round(every / 0.01)
    n = -(-mel.shape[1] // frames)
    values = np.array([[mel[:, i * frames : (i + 1) * frames].mean()] for i in range(n)])
    return values, tuple(
        f"{i * every:.2f}–{min((i + 1) * every, mel.shape[1] / 100):.2f} s" for i in range(n)
    )


def _pick(g: np.random.Generator, words) -> tuple[int, list[int]]:
    """The word asked about (a spoken word whose text occurs once) and the `OPTIONS` words whose spans
    are offered (it among them), in time order."""
    spoken = _spoken(words)
    texts = [words[i].text.strip().lower() for i in spoken]
    once = [i for i, text in zip(spoken, texts, strict=True) if texts.count(text) == 1] or spoken
    asked = int(g.choice(once))
    others = [i for i in spoken if i != asked]
    offered = g.choice(others, size=min(OPTIONS - 1, len(others)), replace=False)
    return asked, sorted([asked, *(int(i) for i in offered)])


def span(seed: int, step: int = 0, *, framework: str | None = None, ckpt=None) -> Exercise:
    """Which span of the clip does a word of the transcript read? (Whisper tiny.en, in `framework`:
    the lessons' framework by default.)"""
    framework = framework or checkpoints.framework()
    ckpt = ckpt or checkpoints.load(MODEL)
    g, names = rng(seed, step, LESSON), sorted(clips())
    clip = names[int(g.integers(len(names)))]
    run = heard(ckpt, clip, framework)
    t, mel = run["transcript"], run["mel"]
    words = t.words
    asked, offered = _pick(g, words)
    word = words[asked].text.strip()
    spans = [(float(words[i].start), float(words[i].end)) for i in offered]
    options = tuple(f"{LETTERS[k]}: {a:.2f} – {b:.2f} s" for k, (a, b) in enumerate(spans))
    answer = offered.index(asked)
    row = word_row(t, words[asked], mel.shape[1] // 2)
    start, end = spans[answer]
    share, peak = _share(row, start, end), float(np.argmax(row)) * SECONDS_PER_POSITION
    position = f"the {_ordinal(asked + 1)} of {len(words)} words"

    def check(choice: int) -> tuple[bool, str]:
        if choice == answer:
            return True, (
                f"Right: the model times “{word}” from {start:.2f} s to {end:.2f} s, and its cross-attention "
                f"reads there: {share:.0%} of the alignment heads' weight for “{word}” falls in that span."
            )
        other = words[offered[choice]].text.strip()
        when = "later" if offered[choice] < asked else "earlier"
        return False, (
            f"Span {LETTERS[choice]} is where the model says “{other}” (the {_ordinal(offered[choice] + 1)} "
            f"word); “{word}” is {position}, so it comes {when}. Count the bursts of sound between the pauses."
        )

    return Exercise(
        step=step,
        key="span",
        title="Which sound a word reads",
        seed=seed,
        intro=(
            "Whisper writes text with a decoder that **cross-attends** to the sound: its queries come from the "
            "words written so far, its keys and values from the encoder, one position per 20 ms. A written word "
            "should read the part of the sound it came from. In the spectrogram, time runs left to right; "
            "speech is bright, silence dark."
        ),
        given=(
            f"**{MODEL}** heard the clip *{clip}* ({mel.shape[1] / 100:.1f} s, made with espeak-ng) and "
            f"wrote:\n\n> {t.text.strip()}\n\nThe spans A–{LETTERS[len(spans) - 1]} are marked on the spectrogram."
        ),
        parts=(
            Part(
                f"Which part of the sound does **“{word}”** ({position}) read? Predict, then look.",
                CHOICE,
                answer,
                check,
                options[answer],
                options=options,
            ),
        ),
        hint="Words are the bright blocks, pauses the dark gaps: count the words of the transcript along the sound.",
        explanation=(
            f"Whisper's timing puts “{word}” at {start:.2f}–{end:.2f} s: it reads the cross-attention of its "
            f"**alignment heads** ({', '.join(formats.head(a, h) for a, h in t.alignment_heads)}), each word's row over "
            "the sound, and aligns the rows with the sound by dynamic time warping. The line over the "
            f"spectrogram is the row of “{word}”, averaged over those heads: {share:.0%} of its weight lies in the span, "
            f"its peak at {peak:.2f} s."
        ),
        data={"mel": mel, "row": row, "spans": spans, "answer": answer, "word": word},
        link=Link(
            "speech",
            "Open this on the Speech page",
            {},
            {"speech.clip": clip, "speech.framework": framework, "speech.word": f"{asked}: {word}"},
        ),
        tables=(("The clip's loudness: the mean log-mel of its 80 bands", *_loudness(mel), ("log-mel",)),),
        lesson=LESSON,
    )
