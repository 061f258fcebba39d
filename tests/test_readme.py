"""The README's library example runs as written and prints what its comments say."""

import contextlib
import io
import re
from pathlib import Path

from tests.conftest import requires

README = Path(__file__).parents[1] / "README.md"


@requires("torch", "tensorflow")
def test_readme_example_runs_and_its_comments_hold():
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    commented = [m.group(1).strip() for m in re.finditer(r"print\(.*?\)\s+# (.*)", block)]
    assert len(printed) == len(commented) == 4
    for line, comment in zip(printed, commented, strict=True):
        assert line.startswith(comment.removesuffix("...]").removesuffix("...").rstrip(", ")), (line, comment)
