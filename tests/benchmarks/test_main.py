"""``python -m benchmarks bench|evaluate|drift``: the one entry point dispatches, and the CLI points there."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import main
from streamembed.cli import main as cli


def test_usage_and_unknown_commands(capsys) -> None:
    assert main(["--help"]) == 0
    assert "bench" in capsys.readouterr().out
    assert main([]) == 2
    assert main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err


def test_evaluate_lists_the_datasets(capsys) -> None:
    assert main(["evaluate", "--list"]) == 0
    out = capsys.readouterr().out
    assert "swiss_roll" in out and "novel_cluster" in out


def test_drift_is_the_evaluate_drift_benchmark(monkeypatch) -> None:
    from benchmarks import drift_bench

    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        return 0

    monkeypatch.setattr(drift_bench, "main", fake)
    assert main(["drift", "--drift-quick", "--no-peers"]) == 0
    assert seen["quick"] is True and seen["peers"] is False


@pytest.mark.parametrize(("argv", "pointer"), [(["evaluate", "--datasets", "digits"], "python -m benchmarks evaluate"),
                                               (["evaluate", "--list"], "python -m benchmarks evaluate")])
def test_the_installed_cli_points_to_the_benchmarks(argv, pointer, capsys) -> None:
    assert cli(argv) == 2
    assert pointer in capsys.readouterr().err
