"""``streamembed producer rows|answer``: the producer kit (``streamembed.producer``) from the command line.

``rows OBJECTS -m MODEL [--root ROOT] -o OUT.parquet``: input rows for the
objects of OBJECTS (text lines, JSON lines or Parquet with ``id`` and
``object``, as ``fit --objects`` reads them) against the newest landmark
version of MODEL's map (its refits under ``ROOT/models``), each tagged with
its ``landmark_version``, written atomically (a hidden temporary, then the
name: a watched directory never sees half a file).

``answer --objects FILE -m MODEL --root ROOT [--wait S]``: answer the pending
refit request of the daemon of ``ROOT`` (``ROOT/refit-requests``) with the
mutual dissimilarities of its candidates, whose objects FILE holds (the
producer's own store), waiting up to S seconds for one to appear. Exit 0
when one was answered (or none came with ``--wait 0``), 1 when a candidate's
object is not in FILE, 2 refused.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from streamembed.cli.common import EXIT_FAILED, EXIT_OK, Refused, Subparsers, subcommand

if TYPE_CHECKING:
    from streamembed.producer import Producer

__all__ = ["add_parser", "run"]


def _producer(args: argparse.Namespace) -> Producer:
    from streamembed.core.errors import InputError
    from streamembed.producer import Producer

    try:
        return Producer(args.model, root=args.root, metric=args.metric)
    except InputError as exc:
        raise Refused(str(exc)) from None


def rows(args: argparse.Namespace) -> int:
    from streamembed.cli.fit_objects import read_objects

    p = _producer(args)
    objs, ids = read_objects(args.objects, p.metric)
    names = ids if ids is not None else [f"{args.id_prefix}{i}" for i in range(len(objs))]
    out = p.write(args.output, names, objs)
    print(f"wrote {out}: {len(names)} rows against landmark version {p.version} "
          f"(metric {p.metric.name})", file=sys.stderr)
    return EXIT_OK


def answer(args: argparse.Namespace) -> int:
    from streamembed.cli.fit_objects import read_objects

    p = _producer(args)
    objs, ids = read_objects(args.objects, p.metric)
    names = ids if ids is not None else [f"{args.id_prefix}{i}" for i in range(len(objs))]
    known = dict(zip(names, objs, strict=True))
    deadline = time.monotonic() + args.wait
    while True:
        pending = p.pending_requests()
        if pending:
            done = p.answer_requests(known=known)
            print(f"answered {done} of {len(pending)} refit request(s)", file=sys.stderr)
            return EXIT_OK if done == len(pending) else EXIT_FAILED
        if time.monotonic() >= deadline:
            print("no refit request is pending", file=sys.stderr)
            return EXIT_OK
        time.sleep(0.5)


def run(args: argparse.Namespace) -> int:
    return {"rows": rows, "answer": answer}[args.producer_command](args)


HELP = "rows for new objects against the current landmarks; answer refit requests"


def add_parser(subparsers: Subparsers) -> None:
    pr = subcommand(subparsers, "producer", HELP, run, __doc__.split("\n\n", 1)[1] if __doc__ else "")
    sub = pr.add_subparsers(dest="producer_command", metavar="WHAT", required=True)
    for name, help_ in (("rows", "input rows for objects, tagged with their landmark_version"),
                        ("answer", "answer the daemon's pending refit request")):
        s = sub.add_parser(name, help=help_)
        if name == "rows":
            s.add_argument("objects", metavar="OBJECTS", help="text lines, JSON lines or Parquet (id, object)")
            s.add_argument("-o", "--output", required=True, metavar="OUT.parquet")
        else:
            s.add_argument("--objects", required=True, metavar="FILE",
                           help="the producer's objects (text lines, JSON lines or Parquet with id, object)")
            s.add_argument("--wait", type=float, default=0.0, metavar="S",
                           help="wait up to S seconds for a request (default: 0, look once)")
        s.add_argument("-m", "--model", required=True, metavar="MODEL.npz",
                       help="the model the deployment started with")
        s.add_argument("--root", metavar="ROOT", help="the daemon's output.root (refitted versions, refit requests)")
        s.add_argument("--metric", help="the metric between objects (default: the model's)")
        s.add_argument("--id-prefix", default="obj", help="ids of objects without one: PREFIX + line number")
