"""What the pages use from `attnviz.ui`, in one import (`from attnviz.ui import controls`).

Each job lives in its own module; this one only gathers their public names:

- `text`        escape_markdown (visitor text made literal)
- `url`         the configuration's session state and its link
- `loading`     frameworks and shared modules, imported once per server
- `sidebar`     the shared configuration widgets (drawn by app.py)
- `mask_editor` presets and the checkbox grid of a custom mask
- `runs`        the configuration checked once, cached runs, comparisons and timings
- `downloads`   JSON / .npz / CSV download buttons
- `widgets`     small widgets and chart callbacks (batch item, table height, panel clicks)
"""

from __future__ import annotations

from attnviz.ui.downloads import downloads
from attnviz.ui.loading import (
    APP_THREADS,
    gpu_available,
    import_shared_modules,
    installed_frameworks,
    load_framework,
    loaded,
)
from attnviz.ui.mask_editor import MAX_EDITOR_SIDE, PRESETS, editor_columns, mask_editor, preset_mask
from attnviz.ui.runs import checked, compare, configure, run, timing
from attnviz.ui.sidebar import sidebar
from attnviz.ui.text import escape_markdown
from attnviz.ui.url import PATTERN, choose, runnable_state, state
from attnviz.ui.widgets import batch_item, enlarge_clicked, table_height

__all__ = [
    "APP_THREADS",
    "MAX_EDITOR_SIDE",
    "PATTERN",
    "PRESETS",
    "batch_item",
    "checked",
    "choose",
    "compare",
    "configure",
    "downloads",
    "editor_columns",
    "enlarge_clicked",
    "escape_markdown",
    "gpu_available",
    "import_shared_modules",
    "installed_frameworks",
    "load_framework",
    "loaded",
    "mask_editor",
    "preset_mask",
    "run",
    "runnable_state",
    "sidebar",
    "state",
    "table_height",
    "timing",
]
