"""Why the daemon stops, as exit codes that tell a supervisor whether to restart it.

| code | meaning | a supervisor should |
| --- | --- | --- |
| 0 | stopped cleanly: SIGTERM/SIGINT/SIGHUP (``daemon.signals``), a limit, or batch mode finished | not restart |
| 1 | died of an unexpected error (a bug); nothing durable is lost | restart (a crashing batch is quarantined) |
| 2 | refused: configuration, model file or run state a restart cannot fix | not restart; fix what the message names |
| 3 | the environment is not ready: disk full, port taken, permissions, brokers unreachable | restart with backoff |

The codes and the two start-up errors are defined in ``streamembed.exits`` (any layer that builds part of a
run raises them); here they are with the test of which errors the environment causes.

``deploy/systemd/streamembed.service`` has ``RestartPreventExitStatus=2``;
Kubernetes restarts every exit and the log line says which it was.
"""

from __future__ import annotations

import errno

from streamembed.exits import (EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EnvironmentUnavailable,
                               StartupError)

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_REFUSED", "EXIT_UNAVAILABLE", "StartupError", "EnvironmentUnavailable",
           "is_environment_error"]


#: OSError numbers that mean "the world is temporarily wrong", not "the input is wrong".
ENVIRONMENT_ERRNOS = frozenset(getattr(errno, name) for name in (
    "ENOSPC", "EDQUOT", "EROFS", "EIO", "EACCES", "EPERM", "EAGAIN", "EBUSY", "EMFILE", "ENFILE", "ENOMEM",
    "EADDRINUSE", "EADDRNOTAVAIL", "ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH", "ETIMEDOUT", "ENOENT", "ESTALE",
) if hasattr(errno, name))


def is_environment_error(exc: BaseException) -> bool:
    """True for an OSError the environment causes (full disk, permissions, network) or running out of memory,
    at any depth of causes."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS or isinstance(exc, MemoryError):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return False
