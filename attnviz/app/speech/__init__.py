"""The Speech screen: Whisper\x27s cross-attention over a clip (issue 43)."""
