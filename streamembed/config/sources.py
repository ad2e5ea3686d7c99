"""The source kinds ``source.kind`` chooses from: one registry (``SOURCES``), a :class:`SourceKind` per kind.

A kind names its settings' section, the builder that makes the daemon's
source from the configuration (``"package.module:function"``, imported only
when that kind runs: a daemon on a directory imports nothing of Kafka), how
the loop commits its positions and how output files are named, and the
configuration checks of its own settings. ``source.kind``'s choices, the
daemon's assembly (``daemon.assembly``), the configuration checks and the
docs' table are derived from here; nothing else branches on a kind.

* ``commits``: "behind" — the loop seals a roll and commits it on a thread
  while it embeds the next batches (a file or generator position is only a
  number in ``checkpoint.json``); "in_loop" — the commit is the source's own
  (Kafka offsets, which the consumer must commit from its thread).
* ``files``: "tagged" — one output and dead-letter file per roll, named by
  the roll's first position and this daemon's writer tag (daemons with their
  own roots can share a directory); "per_stream" — one file per stream of the
  input per roll (a Kafka partition), untagged, so a partition's next owner
  replaces what a crashed one published.

The builder is called as ``build(cfg, context)`` with a
``stream.sources.base.SourceContext`` and returns a
``stream.sources.base.SourceSetup``. A new kind is one module (its source
class and builder) and one ``SOURCES.register(SourceKind(...))`` line, plus
its settings section in ``config.schema`` if it has settings (docs/extending.md).

This module imports nothing of the layers above the configuration: the
builders are named, not imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from streamembed.core.registry import Registry

__all__ = ["SourceKind", "SOURCES", "COMMIT_STYLES", "FILE_NAMINGS", "check_source", "consumes_kafka"]

#: How the loop commits a kind's positions (module doc).
COMMIT_STYLES: tuple[str, ...] = ("behind", "in_loop")
#: How a kind's output files are named (module doc).
FILE_NAMINGS: tuple[str, ...] = ("tagged", "per_stream")


@dataclass(frozen=True)
class SourceKind:
    """One kind of source.

    Attributes:
        name: its ``source.kind`` value.
        section: the configuration section of its own settings ([directory], [generator], [kafka]), or None.
        builder: ``"package.module:function"`` building the daemon's source (module doc).
        commits: "behind" or "in_loop" (``COMMIT_STYLES``).
        files: "tagged" or "per_stream" (``FILE_NAMINGS``).
        doc: one line for the documentation tables.
        check: the cross-checks of its settings, ``check(cfg)`` raising ValueError naming the key (or None).
        preflight: ``"package.module:function"`` the daemon calls with the configuration before it writes
            anything (the environment's checks: a directory that must exist), or None.
    """

    name: str
    section: str | None
    builder: str
    commits: Literal["behind", "in_loop"]
    files: Literal["tagged", "per_stream"]
    doc: str
    check: Callable[[Any], None] | None = None
    preflight: str | None = None


def _path_form(path: str) -> bool:
    module, sep, attr = path.partition(":")
    return bool(module and sep and attr)


def _check(kind: SourceKind, registry: Registry[SourceKind]) -> None:
    if not isinstance(kind, SourceKind):
        raise TypeError(f"a source kind is a SourceKind, got {type(kind).__name__}")
    for what, path in (("builder", kind.builder), ("preflight", kind.preflight)):
        if path is not None and not _path_form(path):
            raise ValueError(f"{what} {path!r} is not of the form 'package.module:function'")
    if kind.commits not in COMMIT_STYLES or kind.files not in FILE_NAMINGS:
        raise ValueError(f"commits must be one of {COMMIT_STYLES} and files one of {FILE_NAMINGS}, got "
                         f"{kind.commits!r}, {kind.files!r}")
    if kind.check is not None and not callable(kind.check):
        raise TypeError("its check is not callable")


def _needs_model_file(cfg: Any) -> None:
    if not cfg.model.path:
        raise ValueError(f"source.kind = {cfg.source.kind!r} needs a model: set model.path to a .npz file "
                         f"(make one with `streamembed fit`)")


def _kafka_settings(cfg: Any) -> None:
    k = cfg.kafka
    if not k.input_topic:
        raise ValueError("source.kind = 'kafka' needs kafka.input_topic")
    if not cfg.model.path and not k.model_topic:
        raise ValueError("source.kind = 'kafka' needs a model: set model.path to a .npz file, or "
                         "kafka.model_topic to take the model another replica published")


#: Every source kind by name (``source.kind``'s choices; the first is the default).
SOURCES: Registry[SourceKind] = Registry("source kind", _check)

SOURCES.register(SourceKind("generator", "generator", "streamembed.stream.sources.generator:build_source",
                            "behind", "tagged", "the built-in Gaussian-mixture stream, with optional drift"))
SOURCES.register(SourceKind("directory", "directory", "streamembed.stream.sources.directory:build_source",
                            "behind", "tagged", "files in a watched directory, each read once it is complete",
                            _needs_model_file, "streamembed.stream.sources.directory:preflight"))
SOURCES.register(SourceKind("kafka", "kafka", "streamembed.kafka.wiring:build_source", "in_loop", "per_stream",
                            "a consumer group on kafka.input_topic", _kafka_settings))


def check_source(cfg: Any) -> None:
    """The configured kind's own cross-checks (ValueError naming the key)."""
    kind = SOURCES[cfg.source.kind]
    if kind.check is not None:
        kind.check(cfg)


def consumes_kafka(cfg: Any) -> bool:
    """Whether the configured source reads Kafka (its settings are [kafka]'s)."""
    return SOURCES[cfg.source.kind].section == "kafka"
