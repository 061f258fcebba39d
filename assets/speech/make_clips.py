"""Make the bundled speech clips with Debian's espeak-ng (1.51), then resample them to 16 kHz mono
16-bit PCM with attnviz.audio.read_wav (SciPy's polyphase filter). Run from the repository root:

    PYTHONPATH=$PWD python assets/speech/make_clips.py

Each clip's text is in clips.json; espeak-ng writes 22,050 Hz mono, voice en-us, 150 words a minute.
"""

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from scipy.io import wavfile

from attnviz.audio import SAMPLE_RATE, read_wav

HERE = Path(__file__).parent

for name, text in json.loads((HERE / "clips.json").read_text()).items():
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(raw), text], check=True)
        audio = read_wav(raw)
    pcm = np.round(np.clip(audio.samples, -1, 1) * 32767).astype(np.int16)
    wavfile.write(HERE / f"{name}.wav", SAMPLE_RATE, pcm)
    print(name, f"{audio.kept_seconds:.2f} s")
