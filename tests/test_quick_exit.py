"""``embed`` ends without the interpreter's teardown, once everything it prints and writes is out; nothing else does."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from streamembed import quick_exit
from streamembed.quick_exit import finish, quick

from .stream.helpers import dissimilarities, fitted_model, input_table, objects

TREE = Path(__file__).resolve().parents[1]

#: In a fresh interpreter: an atexit handler that prints, and a thread that a normal exit would wait for.
_PRELUDE = ("import atexit, sys, threading\n"
            "atexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
            "threading.Thread(target=threading.Event().wait, args=(120,)).start()\n")


def _child(body: str) -> subprocess.CompletedProcess[str]:
    # a normal exit joins the thread for 120 s: the timeout fails the test instead
    return subprocess.run([sys.executable, "-c", _PRELUDE + body], cwd=TREE, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("argv", "expected"), [
    (["embed", "in.arrows", "-m", "m.npz", "-o", "out.parquet"], True),
    (["embed", "in", "--dask", "local"], False),
    (["embed", "in", "--dask=local:2"], False),
    (["run"], False), (["fit", "--dissimilarities", "D.npy"], False), (["refit"], False), ([], False),
])
def test_only_a_local_embed_exits_quickly(argv: list[str], expected: bool) -> None:
    assert quick(argv) is expected


def test_the_process_ends_at_once_with_its_code_its_output_flushed_and_atexit_run() -> None:
    r = _child("from streamembed.quick_exit import allow, finish\n"
               "allow()\n"
               "print('partial line', end='')\n"
               "sys.stderr.write('no newline either')\n"
               "sys.exit(finish(3, ['embed', 'in.arrows']))\n")
    assert r.returncode == 3
    assert r.stdout == "partial line"
    assert r.stderr == "no newline eitheratexit ran\n"


def test_another_command_returns_its_code_to_the_usual_exit() -> None:
    r = _child("from streamembed.quick_exit import allow, finish\n"
               "allow()\n"
               "code = finish(4, ['run'])\n"
               "print('returned', code)\n"
               "import os; os._exit(code)\n")  # (the prelude's thread would hold a normal exit for 120 s)
    assert r.returncode == 4 and r.stdout == "returned 4\n" and "atexit ran" not in r.stderr


def test_an_embed_that_did_not_say_it_is_done_returns_its_code_to_the_usual_exit() -> None:
    # e.g. `embed --das local` (argparse's abbreviation of --dask): the dask path never calls allow()
    r = _child("from streamembed.quick_exit import finish\n"
               "code = finish(5, ['embed', 'in', '--das', 'local'])\n"
               "print('returned', code)\n"
               "import os; os._exit(code)\n")
    assert r.returncode == 5 and r.stdout == "returned 5\n" and "atexit ran" not in r.stderr


def test_a_stream_that_cannot_be_flushed_leaves_the_exit_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed(io.StringIO):
        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    ended: list[int] = []
    monkeypatch.setattr(quick_exit, "_ALLOWED", [True])
    monkeypatch.setattr(sys, "stdout", Closed())
    assert finish(0, ["embed", "in.arrows"], exit_now=ended.append) == 0
    assert ended == []  # the usual exit reports the closed pipe as Python does


def test_a_code_that_is_not_a_number_is_left_to_sys_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[int] = []
    monkeypatch.setattr(quick_exit, "_ALLOWED", [True])
    assert finish(None, ["embed"], exit_now=ended.append) is None
    assert ended == []


@pytest.mark.parametrize("entry", ["console", "module"])
def test_embed_through_either_entry_point_publishes_everything_before_it_ends(tmp_path: Path, entry: str) -> None:
    est = fitted_model()
    est.save(tmp_path / "m.npz")
    A = dissimilarities(objects(300))
    A[5, 1] = np.nan
    pq.write_table(input_table([f"o{i}" for i in range(300)], A), tmp_path / "in.parquet")
    argv = ["embed", str(tmp_path / "in.parquet"), "-m", str(tmp_path / "m.npz"), "-o", str(tmp_path / "out.parquet"),
            "--batch-rows", "64", "--progress", "never"]
    run = ("from streamembed.entry import main\nsys.exit(main())\n" if entry == "console" else
           "import runpy\nrunpy.run_module('streamembed', run_name='__main__')\n")
    r = _child(f"sys.argv = ['streamembed'] + {argv!r}\n" + run)
    assert r.returncode == 1, r.stderr  # done, with a dead letter
    assert "300 records: 299 embedded" in r.stderr.replace(",", "") and r.stderr.endswith("atexit ran\n")
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.num_rows == 299 and "o5" not in out.column("id").to_pylist()
    dead = pq.read_table(tmp_path / "out.dead-letter").to_pylist()
    assert [d["id"] for d in dead] == ["o5"]
