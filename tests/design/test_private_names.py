"""No module under ``streamembed/`` uses another module's private names.

A leading underscore says "this module's business": a name imported from
elsewhere is either shared (then it is public, documented, in the module where
it belongs) or the importer should not need it (then the code moves). Checked
on the syntax tree of every module:

- ``from X import _name`` where X is a streamembed module (relative or absolute);
- ``X._name`` where X is a name bound to a streamembed module by an import
  (``from streamembed import model_io`` then ``model_io._checksum``);
- a private module (``pkg/_mod.py``) imported from outside its package;
- ``obj._name`` (``obj`` not ``self``/``cls``) where nothing in the module defines ``_name`` (no function, class,
  ``self._name =``, variable, parameter or string of that name): another class's private attribute, reached into
  (``self.detector._S = 0.0``) instead of asked for through a method.

Allowed: ``_native`` (the compiled extension, private by the C extension
convention) and dunders. Tests may import private names for white-box testing:
only the package is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import streamembed

PACKAGE = Path(streamembed.__file__).parent
ALLOWED = frozenset({"_native"})
#: Private attributes of third-party objects used on purpose, and why.
FOREIGN_ATTRIBUTES = {
    "_collector_to_names": "prometheus_client has no public way to list a registry's collectors (ops/metrics.py)",
    "_exit": "os._exit is the standard library's documented way to end a process without its teardown (quick_exit.py)",
    "_run_exitfuncs": "atexit's one way to run its handlers before os._exit skips them (quick_exit.py)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in ALLOWED


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _source(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module name of ``from <...> import``."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private_module_outside(target: str, importer: str) -> bool:
    """``target`` (a streamembed module) has a private component and ``importer`` is not inside its parent."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            parent = ".".join(parts[:i])
            return not (importer == parent or importer.startswith(parent + "."))
    return False


def _imports(module: str, path: Path, tree: ast.Module, mods: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
    """(violations by import, local name -> the streamembed module an import binds it to)."""
    found: list[str] = []
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "streamembed" and _private_module_outside(a.name, module):
                    found.append(f"{node.lineno}: imports the private module {a.name}")
                if a.asname is not None and a.name in mods:
                    bound[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            src = _source(module, path.name == "__init__.py", node)
            if src.split(".")[0] != "streamembed":
                continue
            if _private_module_outside(src, module):
                found.append(f"{node.lineno}: imports from the private module {src}")
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in mods:  # a submodule, bound to a local name
                    bound[a.asname or a.name] = sub
                    if _private_module_outside(sub, module):
                        found.append(f"{node.lineno}: imports the private module {sub}")
                elif _private(a.name) and src != module:
                    found.append(f"{node.lineno}: imports the private name {a.name} from {src}")
    return found, bound


def violations(module: str, path: Path, mods: dict[str, Path]) -> list[str]:
    """``path:line: what`` for every private name of another streamembed module that ``module`` uses."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, bound = _imports(module, path, tree, mods)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and _private(node.attr) and bound[node.value.id] != module):
            found.append(f"{node.lineno}: uses the private name {bound[node.value.id]}.{node.attr}")
    here = str(path.relative_to(PACKAGE.parent)) if path.is_relative_to(PACKAGE.parent) else path.name
    return [f"{here}:{v}" for v in found]


def _defined(tree: ast.Module) -> set[str]:
    """Every name the module defines or spells: functions, classes, ``self._x =``, variables, parameters, imports,
    string constants (``getattr(obj, "_x")``)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and isinstance(n.value, ast.Name)
              and n.value.id in ("self", "cls")):
            out.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def reached_into(path: Path) -> list[str]:
    """``path:line: obj._name`` for each private attribute the module uses but does not define (see the doc)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    defined = _defined(tree)
    here = str(path.relative_to(PACKAGE.parent)) if path.is_relative_to(PACKAGE.parent) else path.name
    return [f"{here}:{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and _private(n.attr) and n.attr not in defined
            and n.attr not in FOREIGN_ATTRIBUTES
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]


def test_no_module_reaches_into_another_objects_private_attributes() -> None:
    found = [v for path in _modules().values() for v in reached_into(path)]
    assert found == [], ("private attributes of objects of other modules used (give the class a public method or "
                         "attribute, or pass what is needed):\n" + "\n".join(found))


def test_no_module_uses_another_modules_private_names() -> None:
    mods = _modules()
    found = [v for mod, path in mods.items() for v in violations(mod, path, mods)]
    assert found == [], ("private names used across modules (make the name public, with a docstring, where it "
                         "belongs, or move the code that needs it):\n" + "\n".join(found))


def test_the_check_sees_each_form(tmp_path: Path) -> None:
    """The checker itself: each form of use is caught, the allowed ones are not."""
    mods = _modules()
    src = tmp_path / "zz_probe.py"
    src.write_text("from streamembed.model_io import _checksum\n"
                   "from ..core.place.criteria.newton import _damped_newton as newton\n"
                   "from streamembed import model_io\n"
                   "model_io._checksum\n"
                   "from streamembed.plots._figure import RECORD_META_KEYS\n"
                   "from ..core import _native\n"
                   "from streamembed.config.fields import seconds as _s\n"
                   "import streamembed.model_io as mio\n"
                   "mio.__doc__\n"
                   "class Own:\n"
                   "    def __init__(self, other):\n"
                   "        self._mine = other._mine\n"
                   "        other.detector._S = 0.0\n"
                   "        getattr(other, '_flag', None)\n"
                   "        other._flag = True\n")
    assert [g.split(": ", 1)[1] for g in reached_into(src)] == ["other.detector._S"]  # model_io._checksum: above
    got = violations("streamembed.stream.zz_probe", src, mods)
    got = [g.split(": ", 1)[1] for g in got]
    assert got == ["imports the private name _checksum from streamembed.model_io",
                   "imports the private name _damped_newton from streamembed.core.place.criteria.newton",
                   "imports from the private module streamembed.plots._figure",
                   "uses the private name streamembed.model_io._checksum"]
