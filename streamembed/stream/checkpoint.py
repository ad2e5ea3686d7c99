"""The checkpoint: which input has been fully handled, as one JSON file.

Written atomically (temp file, fsync, rename, fsync dir) and only after the
sinks are durable, so after a crash the engine resumes from the last
committed positions and at most the batches since then are processed again.

Format (``schema_version`` 1)::

    {"schema_version": 1, "written_at": "2025-01-01T00:00:00.000000+00:00",
     "model_version": 1,
     "sources": {"files": {"done": ["a.parquet"], "current": {"file": "b.arrow", "row": 2048}},
                 "generator": {"next_batch": 17}}}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from streamembed.atomic import atomic_write_bytes

__all__ = ["CHECKPOINT_SCHEMA_VERSION", "Checkpoint", "CheckpointError", "CheckpointStore"]

CHECKPOINT_SCHEMA_VERSION = 1


class CheckpointError(ValueError):
    """The checkpoint file exists but cannot be used."""


@dataclass
class Checkpoint:
    """Committed positions per source name (each a JSON-serialisable state)."""

    sources: dict[str, Any] = field(default_factory=dict)
    model_version: int | None = None
    written_at: str | None = None


class CheckpointStore:
    """Load and atomically save a :class:`Checkpoint` at ``path``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.commits = 0

    def load(self) -> Checkpoint | None:
        """The committed checkpoint, or None if there is none yet.

        Raises :class:`CheckpointError` for an unreadable file or an unknown
        schema version (the message says how to start over).
        """
        if not self.path.exists():
            return None
        hint = f"fix or delete {self.path} to start from the beginning"
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {self.path} is unreadable ({exc}); {hint}") from exc
        if not isinstance(doc, dict) or doc.get("schema_version") != CHECKPOINT_SCHEMA_VERSION:
            version = doc.get("schema_version") if isinstance(doc, dict) else None
            raise CheckpointError(
                f"checkpoint {self.path} has schema_version {version!r}, expected "
                f"{CHECKPOINT_SCHEMA_VERSION}; {hint}"
            )
        sources = doc.get("sources", {})
        if not isinstance(sources, dict):
            raise CheckpointError(f"checkpoint {self.path}: 'sources' must be an object; {hint}")
        return Checkpoint(sources=sources, model_version=doc.get("model_version"), written_at=doc.get("written_at"))

    def save(self, checkpoint: Checkpoint) -> None:
        """Commit ``checkpoint`` atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "schema_version": CHECKPOINT_SCHEMA_VERSION,
            "written_at": datetime.now(timezone.utc).isoformat(),
            "model_version": checkpoint.model_version,
            "sources": checkpoint.sources,
        }
        atomic_write_bytes(self.path, json.dumps(doc, indent=1, sort_keys=True).encode("utf-8"))
        self.commits += 1
