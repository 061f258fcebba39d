"""The app's pages, listed once: app.py routes this list and Home links to every entry.

Each page is a thin Streamlit script, `pages/<name>.py` (the design card's top-level folder), served
at `/<name>` (Home at `/`); the screen's work — state, link binding, cached work, tasks, figures — is
in its folder `attnviz/app/<name>/`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PageInfo:
    """One page of the app.

    Attributes:
        name: the page's script `pages/<name>.py`, its URL path (`/explorer`) and the screen's
            folder under `attnviz/app/`.
        title: its name in the navigation and on Home.
        icon: a Material icon name (`:material/…:`).
        blurb: one sentence for Home.
        sidebar: how the page uses the shared attention configuration —
            "full" (every control), "both frameworks" (every control but the
            framework choice: the page runs both) or "none" (the controls stay
            in a collapsed section, so the link keeps the configuration).
        preview_first: until a worker has the chosen framework loaded, the page draws attnviz's NumPy
            reference's chart first and imports the modules its tables need (pandas) after it
            (`attnviz.app.explorer.preview`), so the sidebar leaves that import to it.
    """

    name: str
    title: str
    icon: str
    blurb: str
    sidebar: str = "full"
    preview_first: bool = False

    @property
    def path(self) -> str:
        """The page's script, relative to the repository root (where app.py is)."""
        return f"pages/{self.name}.py"

    @property
    def uses_config(self) -> bool:
        return self.sidebar != "none"


PAGES: tuple[PageInfo, ...] = (
    PageInfo(
        "home",
        "Home",
        ":material/home:",
        "What attention is, and where each page helps.",
        sidebar="none",
    ),
    PageInfo(
        "lesson",
        "Lesson",
        ":material/school:",
        "Three lessons — attention in eight steps, modern attention, circuits: predict first, then see the "
        "computed answer on real weights; a different instance per seed, each step a link.",
        sidebar="none",
    ),
    PageInfo(
        "teacher",
        "Teacher",
        ":material/groups:",
        "Create a class: a code and QR code for the students, and a private link to how they answer, live.",
        sidebar="none",
    ),
    PageInfo(
        "explorer",
        "Multi-head explorer",
        ":material/grid_view:",
        "All heads' heatmaps at once, per-head summaries, the shape of every step, downloads.",
        preview_first=True,
    ),
    PageInfo(
        "steps",
        "Step by step",
        ":material/stairs:",
        "One head's pipeline, one matrix at a time, with the PyTorch and TensorFlow code side by side — "
        "and the four mask conventions that trip people up.",
    ),
    PageInfo(
        "compare",
        "PyTorch vs TensorFlow",
        ":material/balance:",
        "The same weights and inputs in both frameworks: the difference at every step, and a verdict "
        "against the tolerance.",
        sidebar="both frameworks",
    ),
    PageInfo(
        "pretrained",
        "Pretrained model",
        ":material/psychology:",
        "A trained encoder's real heads (previous-token, [CLS], [SEP] heads), computed by attnviz's own "
        "attention in either framework.",
        sidebar="none",
    ),
    PageInfo(
        "interpret",
        "Interpretability",
        ":material/biotech:",
        "What heads do, not only where they look: a head-role scan, the logit lens, activation patching, and "
        "the induction circuit from the Training lab to a real model, confirmed by ablation.",
        sidebar="none",
    ),
    PageInfo(
        "models",
        "Compare models",
        ":material/compare_arrows:",
        "The same prompt through two decoders (SmolLM2 and Gemma 3): attention sinks, span and head roles by "
        "relative depth, KV-cache bytes per token, and where the parameters sit.",
        sidebar="none",
    ),
    PageInfo(
        "tiles",
        "FlashAttention tiles",
        ":material/view_module:",
        "A real head computed as FlashAttention does it, tile by tile: running max and denominator, the "
        "output converging, memory against L × L; and each decoder's KV-cache size.",
        sidebar="none",
    ),
    PageInfo(
        "decoding",
        "Decoding",
        ":material/keyboard_tab:",
        "A real decoder generating token by token over its KV cache: the new query row, the cache's K and V "
        "rows growing, the work and the time per token with and without the cache, and the cache's size.",
        sidebar="none",
    ),
    PageInfo(
        "speech",
        "Speech",
        ":material/graphic_eq:",
        "Cross-attention in a real model: Whisper tiny.en transcribes a clip, and each word's row shows the "
        "part of the sound it read — the decoder's queries over the encoder's keys and values.",
        sidebar="none",
    ),
    PageInfo(
        "training",
        "Training lab",
        ":material/model_training:",
        "Train a tiny transformer live and watch its heads form: previous-token, mirror and induction heads.",
        sidebar="none",
    ),
    PageInfo(
        "timing",
        "Timing",
        ":material/timer:",
        "attnviz against each framework's own attention: steady-state medians over lengths, on request.",
        sidebar="none",
    ),
)


def by_title(title: str) -> PageInfo:
    return next(p for p in PAGES if p.title == title)


def by_name(name: str) -> PageInfo:
    return next(p for p in PAGES if p.name == name)
