"""No runtime back-call circle between the model and the modules it delegates to.

The import graph (``test_structure``) sees ``core.model`` import a module; it
cannot see that module's functions take the model back and call its methods
(the former ``core.placement.place(model)`` calling ``model.kernel``, ``model.cached``, ...):
a cycle that runs only at run time. Here a function in any module the model
reaches through its imports is refused when it takes a parameter named
``model`` (or annotated ``LandmarkModel``) and calls a method defined on
``LandmarkModel`` on it. Consumers above the model (the estimator, refits,
the streaming layer) call it freely: the model does not reach them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.design.test_structure import PACKAGE, _modules, import_graph

MODEL_MODULES = {"streamembed.core.model"}


def _model_methods() -> set[str]:
    """Names of the methods (not properties) defined on ``LandmarkModel``."""
    tree = ast.parse((PACKAGE / "core" / "model.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LandmarkModel")
    out = set()
    for n in cls.body:
        if isinstance(n, ast.FunctionDef):
            decorators = {ast.unparse(d) for d in n.decorator_list}
            if not decorators & {"property", "staticmethod", "classmethod"} and not n.name.startswith("__"):
                out.add(n.name)
    return out


def _reached_by_model() -> set[str]:
    """Modules the model's own modules import, directly or transitively."""
    graph = import_graph()
    seen: set[str] = set()
    todo = [m for mod in MODEL_MODULES for m in graph[mod]]
    while todo:
        m = todo.pop()
        if m not in seen and m not in MODEL_MODULES:
            seen.add(m)
            todo.extend(graph[m])
    return seen


def _model_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args
            if a.arg == "model" or (a.annotation is not None and "LandmarkModel" in ast.unparse(a.annotation))}


def back_calls(path: Path, methods: set[str]) -> list[str]:
    """``function: param.method`` for every call of a model method on a function's model parameter."""
    tree = ast.parse(path.read_text())
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = _model_params(fn)
        for node in ast.walk(fn):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in params
                    and node.func.attr in methods):
                found.append(f"{fn.name}: {node.func.value.id}.{node.func.attr}")
    return sorted(set(found))


def test_the_back_call_finder_finds_one(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("def f(m: 'LandmarkModel', A):\n    return m.kernel(2, A.dtype)(A)\n"
                   "def g(model):\n    return model.n_landmarks\n")
    assert back_calls(src, {"kernel"}) == ["f: m.kernel"]


def test_the_model_reaches_its_placer() -> None:
    assert "streamembed.core.place.projection" in _reached_by_model()


def test_no_module_the_model_delegates_to_calls_back_into_it() -> None:
    methods = _model_methods()
    assert {"place", "kernel"} <= methods
    mods = _modules()
    found = {m: calls for m in sorted(_reached_by_model()) if (calls := back_calls(mods[m], methods))}
    assert not found, f"functions that take the model and call back into it: {found}"
