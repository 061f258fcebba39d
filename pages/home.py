import streamlit as st

st.title("attnviz")
st.write("See how attention works, in PyTorch and TensorFlow side by side.")
