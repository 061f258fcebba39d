"""Make a framework unimportable in this process, as if it were not installed.

`sys.modules[name] = None` makes `import name` raise ImportError and
`importlib.util.find_spec(name)` return None — what attnviz sees on a
machine without it. Used through ATTNVIZ_BLOCK=tensorflow (or torch) by
tests/conftest.py, and directly by subprocess tests.
"""

import sys

MODULES = {"tensorflow": ("tensorflow", "keras", "tf_keras"), "torch": ("torch",)}


def block(framework: str) -> None:
    for name in MODULES[framework]:
        if sys.modules.get(name) is not None:
            raise RuntimeError(f"{name} is already imported; block it before anything imports it")
        sys.modules[name] = None
