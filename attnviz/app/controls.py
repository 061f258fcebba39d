"""What the screens use from the two shared folders, in one import (`from attnviz.app import controls`).

Each job lives in its own module; this one only gathers their public names:

- `frame/literal`      escape_markdown (visitor text made literal)
- `frame/loading`      the frameworks as the server knows them (none imported here), shared modules
- `frame/widgets`      small widgets and chart callbacks (batch item, table height, panel clicks)
- `sidebar/url`        the configuration's session state and its link
- `sidebar/panel`      the shared configuration widgets (drawn by app.py)
- `sidebar/mask_editor` presets and the checkbox grid of a custom mask
- `sidebar/runs`       the configuration checked once; runs, comparisons and timings (in workers), cached
- `sidebar/downloads`  JSON / .npz / CSV download buttons
"""

from __future__ import annotations

from attnviz.app.frame.literal import escape_markdown
from attnviz.app.frame.loading import (
    APP_THREADS,
    gpu_available,
    gpu_known,
    import_shared_modules,
    installed_frameworks,
    loaded,
)
from attnviz.app.frame.widgets import batch_item, enlarge_clicked, table_height
from attnviz.app.sidebar.downloads import downloads
from attnviz.app.sidebar.mask_editor import MAX_EDITOR_SIDE, PRESETS, editor_columns, mask_editor, preset_mask
from attnviz.app.sidebar.panel import sidebar
from attnviz.app.sidebar.runs import checked, compare, configure, ready, run, run_and_timing, run_key, timing
from attnviz.app.sidebar.url import PATTERN, choose, runnable_state, state

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
    "gpu_known",
    "import_shared_modules",
    "installed_frameworks",
    "loaded",
    "mask_editor",
    "preset_mask",
    "ready",
    "run",
    "run_and_timing",
    "run_key",
    "runnable_state",
    "sidebar",
    "state",
    "table_height",
    "timing",
]
