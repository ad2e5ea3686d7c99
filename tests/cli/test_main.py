"""The command line's assembly: one module per subcommand, the help lists each, the parser is cheap to build."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import streamembed
from streamembed.cli import SUBCOMMANDS, build_parser, main

TREE = Path(streamembed.__file__).resolve().parents[1]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_help_documents_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for word in ("run", "fit", "embed", "config", "STREAMEMBED_"):
        assert word in out
    for sub in _subparsers():
        with pytest.raises(SystemExit) as e:
            main([sub, "--help"])
        assert e.value.code == 0
        assert "usage: streamembed " + sub in capsys.readouterr().out


def test_each_subcommand_is_one_module_with_add_parser_and_run() -> None:
    names = {m.__name__.rsplit(".", 1)[1]: m for m in SUBCOMMANDS}
    parsers = _subparsers()
    assert list(parsers) == list(names)  # listed in SUBCOMMANDS' order, one each
    for name, module in names.items():
        assert callable(module.add_parser) and callable(module.run), name
        func = parsers[name].get_default("func")
        assert func is module.run or (func is None and name == "evaluate"), (name, func)  # evaluate: own parser


def test_bench_is_no_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmarks are not installed (``python -m benchmarks bench`` from a source checkout): the parser
    refuses ``bench`` as any unknown command (exit 2)."""
    assert "bench" not in _subparsers()
    with pytest.raises(SystemExit) as info:
        main(["bench", "--quick", "--json", "x.json"])
    assert info.value.code == 2 and "invalid choice: 'bench'" in capsys.readouterr().err


def test_building_the_parser_imports_no_heavy_module() -> None:
    """Each subcommand imports what it runs inside ``run``: the parser alone loads no solver, transport, plotting,
    Arrow nor the layers it drives."""
    probe = ("import json, sys; from streamembed.cli import build_parser; build_parser(); "
             "print(json.dumps(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=TREE, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    heavy = ("scipy", "pyarrow", "pandas", "sklearn", "kafka", "matplotlib", "dask", "prometheus_client",
             "streamembed.stream", "streamembed.daemon", "streamembed.kafka", "streamembed.plots",
             "streamembed.evaluate_data", "streamembed.estimator")
    loaded = [m for m in json.loads(r.stdout) if m.startswith(heavy)]
    assert loaded == [], loaded


def test_the_entry_points_are_cli_main_after_the_daemon_signals() -> None:
    """Both ways in run ``cli.main``, after installing the daemon's signal handlers (``daemon.signals``: a
    ``streamembed run`` signalled while it imports must not die of SIGUSR1 or SIGHUP)."""
    scripts = tomllib.loads((TREE / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["streamembed"] == "streamembed.entry:main"
    main_py = (TREE / "streamembed" / "__main__.py").read_text()
    assert main_py.index("install_early_if_daemon(") < main_py.index("from streamembed.cli import main")
    entry = (TREE / "streamembed" / "entry.py").read_text()
    assert entry.index("install_early_if_daemon(") < entry.index("from streamembed.cli import main")
    r = subprocess.run([sys.executable, "-m", "streamembed", "--version"], cwd=TREE, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("streamembed "), r
