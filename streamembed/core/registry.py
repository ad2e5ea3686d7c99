"""One registry per extension axis: the one place that names an axis's members.

Placement methods (``core.place.methods``), metrics (``core.inputs.metrics``),
refit triggers (``core.monitor.triggers``), quality indices (``quality_indices``)
and source kinds (``config.sources``) are each a :class:`Registry`: members
are registered by name, one line each, and every list, choice, output code and
documentation table of the axis is derived from it. A name registered twice,
or a member its axis's ``check`` refuses (a missing routine, a reused output
code, an object that does not satisfy the axis's protocol), raises
:class:`RegistrationError` naming the member — at import, for the built-in
members. A name that is not registered raises ``InputError`` listing the
names that are.

In the spirit of openTSNE (a name is only a lookup in one table; an instance
is accepted wherever a name is) and River's ``checks`` (every member gets the
same conformance tests by being a member: ``tests/contracts/``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from .errors import InputError

__all__ = ["Registry", "RegistrationError", "Named", "resolve_path"]


class RegistrationError(ValueError):
    """A member cannot join its registry: its name is taken, its code reused, or it does not satisfy the axis's
    protocol (the message names the member and the axis)."""


class Named(Protocol):
    """What every member has: the name it is registered under."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Members of one extension axis by name, in registration order.

    Args:
        axis: what a member is ("placement method", "metric", ...), for messages.
        check: called with each member before it joins; raises ``RegistrationError`` (or any ``ValueError`` /
            ``TypeError``, re-raised as one naming the member) when the member does not satisfy the axis's
            protocol, or conflicts with the members already there (``check(member, registry)``).
    """

    def __init__(self, axis: str, check: Callable[[T, Registry[T]], None] | None = None) -> None:
        self.axis = axis
        self._check = check
        self._members: dict[str, T] = {}

    def register(self, member: T) -> T:
        """Add ``member`` (returned, so a module can write ``X = REGISTRY.register(Spec(...))``)."""
        name = getattr(member, "name", None)
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"a {self.axis} needs a non-empty string name, got {member!r}")
        if name in self._members:
            raise RegistrationError(f"{self.axis} {name!r} is registered twice (first: {self._members[name]!r})")
        if self._check is not None:
            try:
                self._check(member, self)
            except RegistrationError:
                raise
            except (ValueError, TypeError) as exc:
                raise RegistrationError(f"{self.axis} {name!r} cannot be registered: {exc}") from exc
        self._members[name] = member
        return member

    def unregister(self, name: str) -> T:
        """Remove and return the member ``name`` (a test's temporary member; the built-ins stay)."""
        return self._members.pop(name)

    def __getitem__(self, name: str) -> T:
        try:
            return self._members[name]
        except (KeyError, TypeError):
            raise InputError(f"unknown {self.axis} {name!r}; known: {', '.join(self._members)}") from None

    def get(self, name: str) -> T | None:
        return self._members.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._members

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._members.values()))

    def __len__(self) -> int:
        return len(self._members)

    def names(self) -> tuple[str, ...]:
        """Every member's name, in registration order."""
        return tuple(self._members)

    def __repr__(self) -> str:
        return f"Registry({self.axis!r}: {', '.join(self._members)})"


def resolve_path(path: str, what: str) -> Any:
    """The object named by ``"package.module:attribute"`` (imported on demand).

    Raises:
        InputError: ``path`` is not of that form, its module cannot be imported or has no such attribute (the
            message names ``what`` the path was given as).
    """
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise InputError(f"{what} {path!r} is not of the form 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise InputError(f"{what} {path!r}: cannot import {module!r} ({exc})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InputError(f"{what} {path!r}: {module!r} has no attribute {attr!r}") from None
    return obj
