"""Speech: a real encoder–decoder (Whisper tiny.en) transcribes a clip, and each word's
cross-attention row shows which part of the sound it read. Queries come from the decoder (the text so
far), keys and values from the encoder (the sound, 20 ms per position).

The transcription runs in a worker (`attnviz.app.speech.tasks.transcribe` through
`attnviz.app.frame.door`). Every control but the clip itself is bound to the URL.
"""

import streamlit as st

from attnviz import pretrained
from attnviz.app import controls
from attnviz.app.frame import door, links
from attnviz.app.frame.shell import routed
from attnviz.app.frame.widgets import device_control
from attnviz.app.speech import fields, figures, tasks
from attnviz.app.speech import work as ui
from attnviz.exec import TaskError
from attnviz.frameworks import label

routed("speech")  # inside app.py's shell, also when Streamlit's pages/ routing ran this file alone
URL, P = "query-params", "speech."

st.title("Speech: cross-attention in a real model")
st.caption(
    "Whisper reads sound with an encoder and writes text with a decoder. In each decoder layer, "
    "**cross-attention** takes its **queries from the decoder** (the words written so far) and its **keys "
    "and values from the encoder** (the sound, one position per 20 ms): each row below is one written "
    "token looking back at the part of the sound it came from."
)
link = links.opened_with(P)
if ui.MODEL not in pretrained.speech_choices():
    st.info(ui.install_note(), icon=":material/info:")
    st.stop()
st.caption(pretrained.notice(ui.MODEL))  # the weights' origin and licence, where the model is shown
with st.sidebar:
    source = st.radio("Sound", ui.SOURCES, key=P + "source", bind=URL)
    framework = st.radio("Framework", controls.installed_frameworks(), format_func=label, horizontal=True,
                         key=P + "framework", bind=URL)  # fmt: skip
    device = device_control(P, framework)  # offered where a GPU is present
data = None
if source == ui.SOURCES[0]:
    clips = ui.clips()
    name = st.selectbox("Clip (made with espeak-ng)", list(clips), key=P + "clip", bind=URL)
    st.caption(f"Its text: “{clips[name]}”")
    data = ui.clip_bytes(name)
elif source == ui.SOURCES[1]:
    upload = st.file_uploader("A WAV file (mono or stereo, 8–48 kHz, up to 30 s used)", type=["wav"],
                              key=P + "upload", max_upload_size=ui.MAX_BYTES >> 20)  # fmt: skip
    data = None if upload is None else upload.getvalue()
else:
    recorded = st.audio_input("Record a sentence", key=P + "record")
    st.caption("If the browser refuses the microphone, allow it for this site, or upload a WAV file instead.")
    data = None if recorded is None else recorded.getvalue()
if data is None:
    st.info("Pick a clip, upload a WAV file or record a sentence.", icon=":material/mic:")
    st.stop()
encoder = st.toggle("Also show the encoder's self-attention over time", key=P + "encoder", bind=URL)
try:
    heard = door.run(tasks.transcribe, ui.MODEL, ui.check_size(data), framework, encoder, device=device,
                     spinner="Transcribing", cache="speech")  # fmt: skip
except (TaskError, ValueError) as error:
    door.show_failure(error, key=P + "again")
    st.stop()
t = heard.transcript
if heard.seconds > heard.kept:
    st.warning(f"The clip is {heard.seconds:.1f} s long: the model hears 30 s at a time, so only the first "
               f"{heard.kept:.0f} s were transcribed.", icon=":material/content_cut:")  # fmt: skip
st.subheader("What the model wrote")
st.markdown(f"> {controls.escape_markdown(t.text) or '(nothing: no words heard)'}")
st.plotly_chart(figures.spectrogram(heard.mel, f"The clip's log-mel spectrogram ({heard.kept:.1f} s)"),
                width="stretch", key=P + "mel")  # fmt: skip
if not t.ids:
    st.stop()

layers, heads = t.cross_attentions.shape[:2]
average = st.toggle("The alignment heads' average", value=True, key=P + "average", bind=URL)
left, right = st.columns(2)
layer = int(fields.LAYER.number_input(left, high=layers - 1, disabled=average))
head = int(fields.HEAD.number_input(right, high=heads - 1, disabled=average))
notes = fields.LAYER.notes(link, high=layers - 1) + fields.HEAD.notes(link, high=heads - 1)
links.show(P, st.empty(), notes)
which = ui.AVERAGE if average else f"layer {layer}, head {head}"
spans = list(zip(t.token_times, t.token_ends, strict=True))
st.plotly_chart(
    figures.cross_attention(ui.rows(t, None if average else layer, None if average else head), ui.token_labels(t),
                            spans, f"Cross-attention, {which} ({label(t.framework)})"),
    width="stretch", key=P + "cross",
)  # fmt: skip
st.caption(
    "Each row is one written token: the decoder step that wrote it (its query is the token before), its "
    "colours that step's attention weights over the clip, time on the same axis as the spectrogram. The outlined box is the span Whisper's timing gives the token "
    "(the alignment heads' rows, standardised, median-filtered, averaged, then dynamic time warping)."
)
st.plotly_chart(figures.alignment_grid(layers, heads, t.alignment_heads, None if average else (layer, head)),
                width="stretch", key=P + "grid")  # fmt: skip

st.subheader("Each word's span")
st.dataframe(ui.word_table(t), hide_index=True)
words = [f"{i}: {w.text.strip()}" for i, w in enumerate(t.words)]
picked = st.selectbox("Play a word", words, key=P + "word", bind=URL)
w = t.words[words.index(picked)]
st.audio(data, start_time=w.start, end_time=max(w.end, w.start + 0.1))
if heard.transcript.encoder_attentions is not None:
    st.plotly_chart(
        figures.encoder_attention(t.encoder_attentions[layer if not average else layers - 1].mean(0),
                                  "The encoder's self-attention (the heads' mean): sound reading sound"),
        width="stretch", key=P + "encoder_map",
    )  # fmt: skip
