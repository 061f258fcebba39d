"""The README's Python examples run as written and print what their comments say."""

import contextlib
import io
import re
from pathlib import Path

from tests.conftest import requires

README = Path(__file__).parents[1] / "README.md"


@requires("torch", "tensorflow")
def test_readme_examples_run_and_their_comments_hold():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 4
    namespace: dict = {}
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), namespace)
        printed = out.getvalue().splitlines()
        commented = [m.group(1).strip() for m in re.finditer(r"print\(.*?\)\s+# (.*)", block)]
        assert len(printed) == len(commented) > 0
        for line, comment in zip(printed, commented, strict=True):
            assert line.startswith(comment.removesuffix("...]").removesuffix("...").rstrip(", ")), (
                line,
                comment,
            )
