"""Every model and placement option, stated once: its allowed values, default, meaning and the combinations it allows.

One declarative table in the spirit of scikit-learn's ``_parameter_constraints``
(``StrOptions``, ``Interval``): ``OPTIONS`` names each option, ``RULES`` the
combinations that are refused. Everything that takes these options reads them
from here: the estimator (``LandmarkMDS``: its signature's defaults and its
parameter check), ``core.model.fit_model``, ``model_io`` (loading a file), the
configuration schema (``streamembed.config``: choices and defaults of
``[model]`` and ``[source]``) and the command line (``choices=`` and
``default=`` of ``fit`` and ``embed``). A design test
(``tests/design/test_one_schema.py``) refuses literal copies elsewhere.

:func:`check_options` checks any subset of the options and raises one
``InputError`` naming every violated constraint and rule, in the caller's own
names (``method='projection'`` for the estimator, ``model.method =
'projection'`` for the configuration).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from .errors import InputError
from .fit.metric_map import LANDMARK_MAPS
from .fit.skeleton import DEFAULT_ALPHA, DEFAULT_NEIGHBORS
from .inputs.kernel import FEATURE_KERNELS
from .place.methods import criterion_methods, kernel_methods, single_methods
from .refit.selections import DEFAULT_LANDMARK_SELECTION, MAP_SELECTIONS, SKELETON_SELECTION

__all__ = ["StrOptions", "Interval", "Option", "Rule", "OPTIONS", "RULES", "DEFAULTS", "check_options",
           "METHODS", "KERNEL_METHODS", "CRITERION_METHODS", "INPUTS", "CORRECTIONS", "EIGENSOLVERS",
           "STREAM_SIZING", "BATCH_ROWS", "MAX_BLOCK_ROWS", "estimator_names", "config_names", "flag_names"]

#: Every single-object placement method (docs/math.md §3; the registry ``core.place.methods.PLACEMENT_METHODS``).
METHODS: tuple[str, ...] = single_methods()
#: Methods that need the classical-MDS map X = U Λ^{1/2} (kernel formulas, docs/math.md §3).
KERNEL_METHODS: tuple[str, ...] = kernel_methods()
#: Methods that place on the map's points only (``core.place.criteria.solve``): any map, refined ones included.
CRITERION_METHODS: tuple[str, ...] = criterion_methods()
#: What the landmark matrix and input rows hold (docs/math.md §2).
INPUTS: tuple[str, ...] = ("dissimilarity", "similarity")
#: Non-Euclidean corrections of the landmark kernel (``core.inputs.cailliez``).
CORRECTIONS: tuple[str, ...] = ("none", "cailliez")
#: Eigensolvers of the landmark spectrum (``core.fit.cmds.fit_spectrum``).
EIGENSOLVERS: tuple[str, ...] = ("auto", "full", "partial")


@dataclass(frozen=True)
class StrOptions:
    """A string among ``values``."""

    values: tuple[str, ...]

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.values

    def describe(self) -> str:
        return f"one of {self.values}"


@dataclass(frozen=True)
class Interval:
    """A number of ``kind`` (int: integers only, booleans excluded; float: any real) in [low, high] ((low, high]
    with ``exclusive_low``)."""

    kind: type
    low: float | None = None
    high: float | None = None
    exclusive_low: bool = False

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, Integral if self.kind is int else Real):
            return False
        x: Any = value  # an Integral or Real: ordered against the float bounds
        low_ok = self.low is None or (x > self.low if self.exclusive_low else x >= self.low)
        return low_ok and (self.high is None or x <= self.high)

    def describe(self) -> str:
        if self.kind is int and self.low == 1 and self.high is None:
            return "a positive integer"
        what = "an integer" if self.kind is int else "a number"
        if self.low is not None and self.high is not None:
            return f"{what} in [{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"{what} {'>' if self.exclusive_low else '≥'} {self.low:g}"
        return what if self.high is None else f"{what} ≤ {self.high:g}"


@dataclass(frozen=True)
class Option:
    """One option: its name, its constraint, whether None is allowed, its default and one line of meaning."""

    name: str
    constraint: StrOptions | Interval
    default: Any
    doc: str
    none_ok: bool = False

    @property
    def values(self) -> tuple[str, ...]:
        """The allowed strings (a string option only; argparse ``choices``, the schema's ``choices``)."""
        if not isinstance(self.constraint, StrOptions):
            raise TypeError(f"option {self.name} is not a string option")
        return self.constraint.values

    def accepts(self, value: Any) -> bool:
        return (value is None and self.none_ok) or self.constraint.accepts(value)

    def describe(self) -> str:
        return ("None or " if self.none_ok else "") + self.constraint.describe()


#: Names an option in the caller's terms: (name) -> "model.method", (name, value) -> "model.method = 'stress'"
#: (the estimator: "method", "method='stress'").
Namer = Callable[..., str]


@dataclass(frozen=True)
class Rule:
    """A refused combination: ``violated(values)`` on the options named in ``needs``, explained by ``message``."""

    name: str
    needs: tuple[str, ...]
    violated: Callable[[Mapping[str, Any]], bool]
    message: Callable[[Mapping[str, Any], Namer], str]


def _option_table() -> dict[str, Option]:
    rows = (
        Option("method", StrOptions(METHODS), "projection",
               f"how single objects are placed: {', '.join(METHODS)} (docs/math.md §3)"),
        Option("n_components", Interval(int, 1), 2, "d, the map's dimension"),
        Option("input", StrOptions(INPUTS), "dissimilarity",
               "what the landmark matrix and input rows hold (docs/math.md §2)"),
        Option("geodesic_neighbors", Interval(int, 1), None, "landmark Isomap through this many nearest landmarks",
               none_ok=True),
        Option("correction", StrOptions(CORRECTIONS), "none", "non-Euclidean correction (core.inputs.cailliez)"),
        Option("landmark_map", StrOptions(LANDMARK_MAPS), "cmds",
               "the landmark map: classical MDS, or refined by smacof / sammon, or nonmetric (core.fit.metric_map)"),
        Option("n_landmarks", Interval(int, 2), None, "landmarks kept among the fit data", none_ok=True),
        Option("landmark_selection", StrOptions(MAP_SELECTIONS), DEFAULT_LANDMARK_SELECTION,
               "how landmarks are chosen (core.refit.landmarks.select_landmarks, docs/landmarks.md; skeleton: "
               "LSDR, docs/math.md §8.4)"),
        Option("skeleton_alpha", Interval(float, 0, 1), DEFAULT_ALPHA,
               "level α of the skeleton's edge tests (landmark_selection 'skeleton', docs/math.md §8.4)"),
        Option("skeleton_neighbors", Interval(int, 1), DEFAULT_NEIGHBORS,
               "k, the geodesic neighbours of the skeleton test (landmark_selection 'skeleton', docs/math.md §8.4)"),
        Option("kernel_bandwidth", Interval(float, 0, exclusive_low=True), None,
               "σ of method 'kernel', in the units of the dissimilarities (None: Roy's rule from the landmarks at "
               "fit, docs/math.md §8.6)", none_ok=True),
        Option("eigensolver", StrOptions(EIGENSOLVERS), "auto", "eigensolver of the landmark spectrum (core.fit.cmds)"),
        Option("n_residual_components", Interval(int, 1), None, "r, eigenpairs of the exact k0 (docs/math.md §4)",
               none_ok=True),
        Option("n_threads", Interval(int, 1), None, "threads of the projection hot path (None: up to 2)",
               none_ok=True),
        Option("random_state", Interval(int), 0, "seed of the landmark selection and the block solver's starts"),
        Option("kernel", StrOptions(FEATURE_KERNELS), "linear",
               "kernel between feature vectors of a similarity model (core.inputs.kernel)"),
        Option("batch_rows", Interval(int, 1), 8192, "most rows per batch of a stream (decoding, placing, writing)"),
        Option("max_block_rows", Interval(int, 1), 4096,
               "largest block (rows carrying `cross`) accepted; a larger one is dead-lettered as bad_block"),
    )
    return {o.name: o for o in rows}


#: Every option by name.
OPTIONS: dict[str, Option] = _option_table()
#: Every option's default by name.
DEFAULTS: dict[str, Any] = {name: o.default for name, o in OPTIONS.items()}
#: The stream sizing options (every reader, source and command takes its default from here).
STREAM_SIZING: tuple[str, ...] = ("batch_rows", "max_block_rows")
#: Their defaults, by name for signatures: most rows per batch, largest block (rows carrying `cross`).
BATCH_ROWS: int = DEFAULTS["batch_rows"]
MAX_BLOCK_ROWS: int = DEFAULTS["max_block_rows"]


def _refined_map_message(v: Mapping[str, Any], name: Namer) -> str:
    names = [repr(m) for m in CRITERION_METHODS]
    either = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return (f"{name('landmark_map', v['landmark_map'])} needs {name('method')} {either}: "
            f"{name('method', v['method'])} needs the classical-MDS map, which a refined map has no projection onto "
            f"(docs/math.md §3)")


def _skeleton_message(other: str, why: str) -> Callable[[Mapping[str, Any], Namer], str]:
    def message(v: Mapping[str, Any], name: Namer) -> str:
        return f"{name('landmark_selection', SKELETON_SELECTION)} cannot take {name(other, v[other])}: {why}"

    return message


#: Refused combinations.
RULES: tuple[Rule, ...] = (
    Rule("refined_map_needs_criterion", ("landmark_map", "method"),
         lambda v: v["landmark_map"] != "cmds" and v["method"] not in CRITERION_METHODS, _refined_map_message),
    Rule("skeleton_needs_feature_distances", ("landmark_selection", "input"),
         lambda v: v["landmark_selection"] == SKELETON_SELECTION and v["input"] != "dissimilarity",
         _skeleton_message("input", "the skeleton is found from Euclidean distances between feature vectors")),
    Rule("skeleton_sets_its_count", ("landmark_selection", "n_landmarks"),
         lambda v: v["landmark_selection"] == SKELETON_SELECTION and v["n_landmarks"] is not None,
         _skeleton_message("n_landmarks", "the skeleton's size is decided by the data (leave it None)")),
    Rule("skeleton_has_its_geodesics", ("landmark_selection", "geodesic_neighbors"),
         lambda v: v["landmark_selection"] == SKELETON_SELECTION and v["geodesic_neighbors"] is not None,
         _skeleton_message("geodesic_neighbors", "the skeleton map is already made of geodesics through its "
                           "manifold graph (leave it None)")),
)


def estimator_names(name: str, *value: Any) -> str:
    """``method='stress'`` (``method`` without a value): how the estimator and ``fit_model`` name options."""
    return f"{name}={value[0]!r}" if value else name


def config_names(section: str) -> Namer:
    """``model.method = 'stress'`` (``model.method`` without a value): how the configuration names options."""
    return lambda name, *value: f"{section}.{name} = {value[0]!r}" if value else f"{section}.{name}"


def flag_names(name: str, *value: Any) -> str:
    """``--landmark-map smacof`` (``--landmark-map`` without a value): how the command line names options."""
    flag = "--" + name.replace("_", "-")
    return f"{flag} {value[0]}" if value else flag


def check_options(names: Namer = estimator_names, /, **values: Any) -> None:
    """Raise InputError naming every value outside its option's constraint and every violated rule.

    Only the options given are checked; a rule is checked when all the options it
    needs are given and valid. Unknown names are a programming error (KeyError).
    """
    problems = []
    for key, value in values.items():
        opt = OPTIONS[key]
        if not opt.accepts(value):
            problems.append(f"{names(key)} must be {opt.describe()}, got {value!r}")
    valid = {k: v for k, v in values.items() if OPTIONS[k].accepts(v)}
    for rule in RULES:
        if all(k in valid for k in rule.needs) and rule.violated(valid):
            problems.append(rule.message(valid, names))
    if problems:
        raise InputError("; ".join(problems))
