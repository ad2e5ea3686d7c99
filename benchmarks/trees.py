"""Load the ``streamembed`` package of another checkout in this process (for old-versus-new benchmarks).

Subprocess comparisons set ``PYTHONPATH`` to each tree instead; this is for a measurement that must run in one
process (e.g. on datasets this checkout builds).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def use_streamembed_from(tree: str | Path) -> ModuleType:
    """Make ``import streamembed`` (and every ``streamembed.*`` import after it) resolve to ``tree/streamembed``.

    The modules of the package already imported are forgotten; ``sys.path`` is not changed: the package's
    ``__path__`` points into ``tree``, so its submodules are found there. Returns the new package module.
    """
    init = Path(tree).resolve() / "streamembed" / "__init__.py"
    if not init.is_file():
        raise FileNotFoundError(f"{tree} has no streamembed package ({init} is missing)")
    for name in [m for m in sys.modules if m == "streamembed" or m.startswith("streamembed.")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location("streamembed", init, submodule_search_locations=[str(init.parent)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["streamembed"] = module
    spec.loader.exec_module(module)
    return module
