"""The placement methods: one registry, one :class:`PlacementMethod` spec per method (docs/math.md §3).

A spec names the method, the routine that places single objects by it (None
for ``block``, block restricted reconstruction, placed whole by
``LandmarkModel.place_blocks``), which landmark maps it can place on, its code
in the output's ``method`` column and whether ``streamembed evaluate``
compares it by default. Everything else that lists methods is derived from
here: the option table's ``method`` choices and its rule that a refined map
needs a criterion (``core.options``), the routing of ``Placer``
(:func:`route`), the output's method dictionary (``stream.output.METHOD_VALUES``),
the ``method`` label of ``streamembed_records_embedded_total``
(``ops.metrics.EMBED_METHODS``) and the methods ``evaluate`` compares
(``evaluate_data.EVALUATED_METHODS``).

A new method is one file (its routine, a :data:`~streamembed.core.place.dispatch.Routine`)
and one ``PLACEMENT_METHODS.register(...)`` line below, with the next output
code: codes are append-only (written files keep their meaning), and the
registry refuses a reused or skipped code, a name registered twice, a single
method without a callable routine (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..errors import InputError
from ..registry import RegistrationError, Registry
from .dispatch import MapGeometry, Routine, l1_placement, project, restricted_reconstruction, stress_placement
from .kernel import bandwidth_problem, kernel_routine

__all__ = ["PlacementMethod", "PLACEMENT_METHODS", "MAP_NEEDS", "single_methods", "kernel_methods",
           "criterion_methods", "output_methods", "evaluated_methods", "route", "block_refusal", "map_problem"]

#: What a method needs of the landmark map: "cmds", the classical-MDS map X = U Λ^{1/2} (kernel formulas:
#: a refined map has no projection onto it); "any", the map's points only (a refined map too).
MAP_NEEDS: tuple[str, ...] = ("cmds", "any")


@dataclass(frozen=True)
class PlacementMethod:
    """One placement method.

    Attributes:
        name: what ``method=`` / ``model.method`` / ``--method`` call it, and the output's ``method`` value.
        code: its index in the output's method dictionary (``stream.output.METHOD_VALUES``): append-only.
        routine: moves the projections of valid single rows to this method's placement (``dispatch.Routine``);
            None for a method that places blocks only (``block``).
        maps: "cmds" (needs the classical-MDS map) or "any" (places on refined maps too), ``MAP_NEEDS``.
        evaluated: ``streamembed evaluate`` compares it by default (cheap enough for every selection × count × seed).
        doc: one line for the documentation tables.
        convex: every placement is a convex combination of the landmarks' map coordinates (a smoother such as
            ``kernel``): it lands inside their hull, so an object of the map's plane is not placed where it is
            (only a landmark is), and a block is refused (block RR would break the promise, :func:`block_refusal`).
        needs: why a map cannot be placed on by it (``MapGeometry`` -> a message, or None when it can), checked
            with the option table's rules (``LandmarkModel.check_method``); None: every map of its ``maps``.
    """

    name: str
    code: int
    routine: Routine | None
    maps: Literal["cmds", "any"]
    evaluated: bool
    doc: str
    convex: bool = False
    needs: Callable[[MapGeometry], str | None] | None = None

    @property
    def single(self) -> bool:
        """Whether it places single objects (``method=``); else blocks only."""
        return self.routine is not None


def _check(method: PlacementMethod, registry: Registry[PlacementMethod]) -> None:
    if not isinstance(method, PlacementMethod):
        raise TypeError(f"a placement method is a PlacementMethod, got {type(method).__name__}")
    if method.routine is not None and not callable(method.routine):
        raise TypeError(f"its routine {method.routine!r} is not callable")
    if method.needs is not None and not callable(method.needs):
        raise TypeError(f"its needs {method.needs!r} is not callable")
    if method.maps not in MAP_NEEDS:
        raise ValueError(f"maps must be one of {MAP_NEEDS}, got {method.maps!r}")
    taken = {m.code: m.name for m in registry}
    if method.code in taken:
        raise RegistrationError(f"placement method {method.name!r}: output code {method.code} is already "
                                f"{taken[method.code]!r}'s (codes are append-only; the next free one is {len(taken)})")
    if method.code != len(taken):
        raise RegistrationError(f"placement method {method.name!r}: output code {method.code} skips codes (codes are "
                                f"append-only and dense; the next free one is {len(taken)})")


#: Every placement method, in output-code order.
PLACEMENT_METHODS: Registry[PlacementMethod] = Registry("placement method", _check)

PLACEMENT_METHODS.register(PlacementMethod(
    "projection", 0, project, "cmds", True, "Gower / landmark MDS / Nyström projection, linear (§3.1)"))
PLACEMENT_METHODS.register(PlacementMethod(
    "restricted", 1, restricted_reconstruction, "cmds", True,
    "restricted reconstruction: also matches the object's norm (secular equation, §3.2)"))
PLACEMENT_METHODS.register(PlacementMethod(
    "stress", 2, stress_placement, "any", False, "raw stress to the landmarks (Sammon's on a Sammon map), §3.4"))
PLACEMENT_METHODS.register(PlacementMethod(
    "l1", 3, l1_placement, "any", False, "absolute error in squared distances; snaps onto vertices, §3.4"))
PLACEMENT_METHODS.register(PlacementMethod(
    "block", 4, None, "cmds", False, "block restricted reconstruction of rows carrying `cross` (§3.3)"))
PLACEMENT_METHODS.register(PlacementMethod(
    "kernel", 5, kernel_routine, "any", False,
    "Nadaraya–Watson average of the landmarks' coordinates (Roy 2021), a convex combination; §8.6",
    convex=True, needs=bandwidth_problem))


def single_methods() -> tuple[str, ...]:
    """The methods that place single objects (the ``method`` option's values)."""
    return tuple(m.name for m in PLACEMENT_METHODS if m.single)


def kernel_methods() -> tuple[str, ...]:
    """Single-object methods that need the classical-MDS map (kernel formulas)."""
    return tuple(m.name for m in PLACEMENT_METHODS if m.single and m.maps == "cmds")


def criterion_methods() -> tuple[str, ...]:
    """Single-object methods that place on the map's points only: any map, refined ones included."""
    return tuple(m.name for m in PLACEMENT_METHODS if m.single and m.maps == "any")


def output_methods() -> tuple[str, ...]:
    """Every method's name in output-code order (the output's method dictionary, the metrics' label values)."""
    return tuple(m.name for m in sorted(PLACEMENT_METHODS, key=lambda m: m.code))


def evaluated_methods() -> tuple[str, ...]:
    """The methods ``evaluate_landmarks`` compares by default."""
    return tuple(m.name for m in PLACEMENT_METHODS if m.single and m.evaluated)


def block_refusal(method: str) -> str | None:
    """Why a block (rows carrying ``cross``) is refused when ``method`` is asked for, or None: a convex method's
    placements are convex combinations of the landmarks, which block RR's are not (``PlacementMethod.convex``)."""
    spec = PLACEMENT_METHODS.get(method)
    if spec is None or not spec.convex:
        return None
    return (f"method {method!r} places single objects only, each a convex combination of the landmarks' coordinates "
            f"(docs/math.md §8.6): a block (rows carrying `cross`, mutual dissimilarities C) would be placed by block "
            f"restricted reconstruction, which is not; send its rows without `cross`, or choose another method")


def map_problem(method: str, geometry: MapGeometry) -> str | None:
    """Why ``method`` cannot place on ``geometry`` beyond the option table's rules (``PlacementMethod.needs``)."""
    spec = PLACEMENT_METHODS.get(method)
    return None if spec is None or spec.needs is None else spec.needs(geometry)


def route(method: str) -> Routine:
    """The routine for ``method`` (InputError for a method no routine places)."""
    spec = PLACEMENT_METHODS.get(method)
    if spec is None or spec.routine is None:
        raise InputError(f"method must be one of {single_methods()}, got {method!r}")
    return spec.routine
