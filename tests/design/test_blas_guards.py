"""Every loop of BLAS calls in the numerical core runs on one BLAS thread (``core.runtime.single_blas_thread``).

numpy and scipy each bring an OpenBLAS with a thread per core; a loop of
matrix products, eigensolvers or factorisations with those threads busy-waiting
between calls ran 3–20× slower on the two shared cores of the development
machine than with one thread (a 1,500-object non-Euclidean fit: 29–97 s against
3.4 s), and numpy's and scipy's pools contend with each other when calls
alternate (docs/performance.md). So no loop in ``streamembed/core`` may make
BLAS calls outside the guard.

Found statically: a *BLAS call* is a matrix product (``@``, ``dot``,
``matmul``, ``tensordot``, ``inner``), anything of ``np.linalg`` or
``scipy.linalg``/``scipy.sparse.linalg``, or a call of a core function that
makes BLAS calls itself outside a guard (by name, to a fixed point). A loop
(``for``, ``while``, comprehensions) that contains one outside a
``with single_blas_thread():`` block is *guarded* only if every call of its
function in the package is inside such a block or inside a function that is
itself always called under the guard (again to a fixed point). The test
fails on each loop that is not, naming it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import streamembed

CORE = Path(streamembed.__file__).parent / "core"
#: Attribute names that are BLAS-level products whatever their receiver.
PRODUCTS = {"dot", "matmul", "tensordot", "inner", "vdot", "multi_dot"}
#: Modules whose every function reaches LAPACK/BLAS.
LINALG = ("linalg.", "lapack.", "blas.")
LOOPS = (ast.For, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.AsyncFor)


@dataclass
class Function:
    """A function (or method) of the core and what its body does outside a BLAS guard."""

    name: str
    where: str
    unguarded_calls: set[str] = field(default_factory=set)  # names called outside a guard
    guarded_calls: set[str] = field(default_factory=set)  # names called inside a guard
    blas: bool = False  # makes a BLAS call outside a guard
    loops: list[tuple[int, bool, set[str]]] = field(default_factory=list)  # (line, direct BLAS, names called)


def _is_guard(node: ast.With) -> bool:
    return any("single_blas_thread" in ast.unparse(item.context_expr) for item in node.items)


def _name(f: ast.AST) -> str:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _callee(node: ast.Call) -> str:
    return _name(node.func)


def _called(node: ast.AST) -> set[str]:
    """Names a call runs: its function, and functions handed to it as arguments (a pool's ``submit(fn, ...)``,
    a solver's ``descend=`` callback), which run while the call does."""
    if not isinstance(node, ast.Call):
        return set()
    return {_callee(node)} | {_name(a) for a in [*node.args, *(k.value for k in node.keywords)]} - {""}


def _is_blas(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
        return True
    if isinstance(node, ast.Call):
        text = ast.unparse(node.func)
        return _callee(node) in PRODUCTS or any(m in text + "." for m in LINALG) or _callee(node) == "eigsh"
    return False


def _walk_unguarded(node: ast.AST) -> Iterator[ast.AST]:
    """Nodes below ``node`` outside guards and outside nested function definitions (lambdas are part of the
    function that writes them: they run while the call they are handed to does)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.With) and _is_guard(child):
            continue
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield child
        yield from _walk_unguarded(child)


def _walk_guarded(node: ast.AST, inside: bool = False) -> Iterator[ast.AST]:
    """Nodes below ``node`` inside a guard (outside nested function definitions)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        now = inside or (isinstance(child, ast.With) and _is_guard(child))
        if now:
            yield child
        yield from _walk_guarded(child, now)


def _functions() -> list[Function]:
    out = []
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            fn = Function(node.name, f"{path.relative_to(CORE.parent)}:{node.lineno} {node.name}")
            for sub in _walk_unguarded(node):
                if _is_blas(sub):
                    fn.blas = True
                fn.unguarded_calls |= _called(sub)
                if isinstance(sub, LOOPS):
                    body = list(_walk_unguarded(sub))
                    fn.loops.append((sub.lineno, any(_is_blas(b) for b in body), set().union(*map(_called, body))))
            fn.guarded_calls = set().union(*map(_called, _walk_guarded(node)))
            out.append(fn)
    return out


def unguarded_loops() -> list[str]:
    """'path:line function: loop at line L' for every loop of BLAS calls outside the guard (module docstring)."""
    fns = _functions()
    # functions that make BLAS calls outside a guard of their own, directly or through others (fixed point)
    numerical = {f.name for f in fns if f.blas}
    while True:
        more = {f.name for f in fns if f.unguarded_calls & numerical} - numerical
        if not more:
            break
        numerical |= more
    # functions every call of which is under a guard, directly or through such functions (fixed point)
    callers: dict[str, list[Function]] = {}
    for f in fns:
        for name in f.unguarded_calls:
            callers.setdefault(name, []).append(f)
    called_guarded = {name for f in fns for name in f.guarded_calls}
    covered = {f.name for f in fns if f.name in called_guarded or f.name in callers}
    while True:
        drop = {name for name in covered if any(c.name not in covered for c in callers.get(name, []))}
        if not drop:
            break
        covered -= drop
    bad = []
    for f in fns:
        for line, direct, calls in f.loops:
            if (direct or calls & numerical) and f.name not in covered:
                bad.append(f"{f.where}: loop at line {line}")
    return bad


def test_every_loop_of_blas_calls_in_the_core_runs_under_single_blas_thread() -> None:
    bad = unguarded_loops()
    assert not bad, "loops of BLAS calls outside `with single_blas_thread():` (core/runtime.py):\n" + "\n".join(bad)


def test_the_check_finds_an_unguarded_loop(tmp_path: Path, monkeypatch) -> None:
    """The analysis is not vacuous: a loop of products is found, the same loop under the guard is not."""
    import tests.design.test_blas_guards as me

    core = tmp_path / "core"
    core.mkdir()
    (core / "m.py").write_text(
        "import numpy as np\n"
        "from .runtime import single_blas_thread\n"
        "def bad(A):\n    for _ in range(3):\n        A = A @ A\n    return A\n"
        "def helper(A):\n    return np.linalg.eigh(A)\n"
        "def bad_too(A):\n    return [helper(a) for a in A]\n"
        "def good(A):\n    with single_blas_thread():\n        for _ in range(3):\n"
        "            A = A @ A\n    return A\n"
        "def inner(A):\n    return [np.linalg.svd(a) for a in A]\n"
        "def outer(A):\n    with single_blas_thread():\n        return inner(A)\n")
    monkeypatch.setattr(me, "CORE", core)
    found = "\n".join(unguarded_loops())
    assert "bad" in found and "bad_too" in found
    assert " good" not in found and "inner" not in found
