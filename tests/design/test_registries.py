"""One registry per extension axis, and nothing else that names the axis's members.

* no module but the source registry (``config/sources.py``) compares a configured source kind (``source.kind``,
  a source's ``name``) with a kind's name, or asks ``isinstance`` of a source class; none asks a trigger's kind
  outside the trigger registry (``core/monitor/triggers.py``), nor pokes at a trigger with ``hasattr``/``getattr``
  (the registry's protocol check does, once);
* the lists that used to restate a registry are derived from it (the option table, the output's method
  dictionary, the metrics' labels, the configuration's choices, the methods ``evaluate`` compares).
"""

from __future__ import annotations

import ast
from pathlib import Path

import streamembed
from streamembed.config.schema import choices
from streamembed.config.sources import SOURCES
from streamembed.core.monitor.triggers import TRIGGERS, detector_choices
from streamembed.core.options import CRITERION_METHODS, KERNEL_METHODS, METHODS
from streamembed.core.place.methods import PLACEMENT_METHODS
from streamembed.evaluate_data import EVALUATED_METHODS
from streamembed.ops.metrics import EMBED_METHODS
from streamembed.stream.output import METHOD_VALUES

PACKAGE = Path(streamembed.__file__).parent
SOURCE_CLASSES = {"KafkaSource", "DirectorySource", "GeneratorSource", "FileSource"}


def _modules() -> list[tuple[str, ast.AST]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text(), filename=str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))]


def _compared(node: ast.Compare) -> tuple[set[str], list[str]]:
    """(the string constants compared, the unparsed other operands)."""
    sides = [node.left, *node.comparators]
    consts = {s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)}
    for s in sides:
        if isinstance(s, (ast.Tuple, ast.List, ast.Set)):
            consts |= {e.value for e in s.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return consts, [ast.unparse(s) for s in sides if not isinstance(s, ast.Constant)]


def branches_on_kinds(modules: list[tuple[str, ast.AST]]) -> list[str]:
    found = []
    for rel, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                consts, others = _compared(node)
                if rel != "config/sources.py" and consts & set(SOURCES.names()) and any(
                        o.endswith(("source.kind", "source_name", "source.name", ".kind")) for o in others):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                if rel != "core/monitor/triggers.py" and consts & set(TRIGGERS.names()) and any(
                        o.endswith("kind") for o in others):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                text = ast.unparse(node.args[-1]) if len(node.args) > 1 else ""
                if node.func.id == "isinstance" and any(c in text for c in SOURCE_CLASSES):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
                if node.func.id in ("hasattr", "getattr") and rel != "core/monitor/triggers.py" \
                        and "trigger" in ast.unparse(node.args[0]).lower():
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_nothing_branches_on_a_source_or_trigger_kind_outside_its_registry() -> None:
    found = branches_on_kinds(_modules())
    assert not found, "branches on a kind (ask the kind's registry entry or the protocol instead):\n" + \
        "\n".join(found)


def test_the_scan_finds_such_branches() -> None:
    probe = ast.parse("if cfg.source.kind == 'kafka':\n    pass\n"
                      "if isinstance(source, KafkaSource):\n    pass\n"
                      "kind = getattr(self.trigger, 'kind', 'rule')\n"
                      "if trigger.kind == 'cusum':\n    pass\n")
    assert len(branches_on_kinds([("daemon/app.py", probe)])) == 4


def test_every_list_of_methods_is_the_registry_s() -> None:
    single = [m.name for m in PLACEMENT_METHODS if m.single]
    assert list(METHODS) == single and list(choices("model.method")) == single
    assert list(KERNEL_METHODS) + list(CRITERION_METHODS) == single
    by_code = [m.name for m in sorted(PLACEMENT_METHODS, key=lambda m: m.code)]
    assert list(METHOD_VALUES) == by_code == list(EMBED_METHODS)
    assert list(EVALUATED_METHODS) == [m.name for m in PLACEMENT_METHODS if m.single and m.evaluated]


def test_the_configuration_offers_exactly_the_registered_kinds() -> None:
    assert choices("source.kind") == SOURCES.names() and choices("drift.detector") == detector_choices()
    assert tuple(c for c in detector_choices() if "+" not in c) == TRIGGERS.names()  # kinds joined by "+"
