"""Speech: Whisper read from CTranslate2's `model.bin`, transcribing a clip through attnviz's own
attention, every cross-attention row kept and each word timed from the alignment heads.

    model.py   `SpeechCheckpoint` (transcribe, greedy decoding as Whisper's), `Transcript`
    timing.py  token and word times from the alignment heads (Whisper's `timing.py`: DTW)
"""

from attnviz.pretrained.speech.model import MAX_NEW_TOKENS, SpeechCheckpoint, Transcript
from attnviz.pretrained.speech.timing import Word, dtw, median_filter

__all__ = ["MAX_NEW_TOKENS", "SpeechCheckpoint", "Transcript", "Word", "dtw", "median_filter"]
