"""The speech lesson: cross-attention in a real encoder–decoder, Whisper tiny.en on the bundled clips.

spans.py   which part of the sound does a word read? (the step; the clips' cached transcriptions)
"""

from attnviz.lessons.speech.spans import MODEL, heard, span, word_row

__all__ = ["MODEL", "heard", "span", "word_row"]
