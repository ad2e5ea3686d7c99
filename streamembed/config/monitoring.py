"""The monitoring sections of the configuration schema: [drift], [consistency], [refit] and [trust].

Part of ``config.schema`` (which re-exports them and documents the conventions): how much to trust the map
and each placement, and when to refit it. Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamembed.config.fields import MAX_ROWS
from streamembed.config.fields import seconds as _s
from streamembed.config.fields import setting as _f
from streamembed.core.monitor import detector as cusum_defaults
from streamembed.core.monitor import coverage_watch as coverage_defaults
from streamembed.core.monitor import drift as rule_defaults
from streamembed.core.monitor import fit_baseline as fit_defaults
from streamembed.core.monitor import plane as plane_defaults
from streamembed.core.monitor.drift import STATISTICS
from streamembed.core.monitor.triggers import DEFAULT_DETECTOR, detector_choices
from streamembed.core.refit.selections import DEFAULT_SELECTION, REFIT_SELECTIONS
from streamembed.core.trust.conformal import DEFAULT_COVERAGE

#: refit.unversioned_rows naming the version the daemon started with (``stream.unversioned.START``, the same word)
START = "start"

__all__ = ["DriftConfig", "ConsistencyConfig", "RefitConfig", "TrustConfig", "DRIFT_STATISTICS"]

#: Statistics the refit trigger may watch (``core.monitor.drift.STATISTICS``).
DRIFT_STATISTICS = STATISTICS


@dataclass
class DriftConfig:
    """[drift]: monitoring the residual kernel k0 and triggering refits (docs/math.md §4)."""

    enabled: bool = _f(True, "Monitor drift through the Nyström residual k0 and trigger refits.")
    window_objects: int = _f(rule_defaults.WINDOW_OBJECTS, "Objects in the sliding drift window.", min=100,
                             max=MAX_ROWS)
    window_seconds: float = _s(0.0, "Also drop objects older than this many seconds (0: by count only).", min=0.0,
                               off=0.0)
    reservoir_objects: int = _f(2000, "Recent objects kept as landmark candidates (feature mode; in dissimilarity "
                                "mode the most recent block with `cross` is the candidate set).", min=0,
                                max=MAX_ROWS)
    stats_every_objects: int = _f(10_000, "Recompute the window's statistics (quantiles, bounds) after this many "
                                  "objects ...", min=1, max=1_000_000_000)
    stats_every_seconds: float = _s(1.0, "... or this many seconds, whichever comes first; the trigger sees them at "
                                    "that granularity.", min=0.0)
    detector: str = _f(DEFAULT_DETECTOR, "What decides a refit (core.monitor.triggers; kinds joined by +, any of "
                       "them firing): cusum, a sequential detector on the per-object unexplained energy whose "
                       "threshold is calibrated on the baseline to expected_run_objects between false alarms (off "
                       "the map, docs/math.md §7); plane, the same on the share of the recent objects' variance the "
                       "map holds against their best d-plane (the map's plane turned, §7.7); coverage, the same on "
                       "the radius's coverage of checked samples (§7.9); rule, the window statistic against "
                       "baseline x ratio below.", choices=detector_choices())
    expected_run_objects: float = _f(cusum_defaults.EXPECTED_RUN_OBJECTS, "cusum: stationary objects expected "
                                     "between false alarms (the calibrated guarantee; at 10,000 objects/s 1e8 is "
                                     "one false alarm per ~2.8 h).", min=1.0, max=1e15)
    min_shift: float = _f(cusum_defaults.MIN_SHIFT, "cusum: the smallest rise of the unexplained energy's mean to "
                          "detect quickly, in baseline standard deviations of one object's value.", min=0.0,
                          max=1e6, exclusive_min=True)
    group_objects: int = _f(cusum_defaults.GROUP_OBJECTS, "cusum: objects averaged per step (near-Gaussian "
                            "increments); correlation between objects is measured on the baseline and accounted "
                            "for.", min=1, max=1_000_000)
    clip_quantile: float = _f(cusum_defaults.CLIP_QUANTILE, "cusum: each object's value is clipped to the baseline's "
                              "1 - q and q quantiles before averaging, so one extreme object cannot raise an alarm "
                              "(heavy tails); 1: no clipping.", min=0.5, max=1.0, exclusive_min=True)
    confidence: float = _f(cusum_defaults.CONFIDENCE, "cusum: probability that the real run between false alarms is "
                           "at least expected_run_objects, over baselines.", min=0.5, max=1.0, exclusive_min=True)
    history_seconds: float = _s(10.0, "Append the window statistics and the detector's state to "
                                "<root>/drift-history.jsonl at most this often (streamembed plot drift reads it; "
                                "0: at every statistics update).", min=0.0)
    statistic: str = _f(STATISTICS[0], "rule: the window statistic the rule watches.",
                        choices=DRIFT_STATISTICS)
    ratio: float = _f(rule_defaults.RULE_RATIO, "rule: drift = the statistic above max(baseline x ratio, baseline + "
                      "margin), where the baseline is its value once baseline_objects objects were seen after a "
                      "(re)fit ...", min=1.0, max=1e6)
    margin: float = _f(rule_defaults.RULE_MARGIN, "rule: ... (the margin of that rule).", min=0.0,
                      max=1e6)
    threshold: float = _f(0.0, "rule: an absolute trigger level instead of the baseline rule (0: baseline rule).",
                          min=0.0, max=1e12, off=0.0)
    hysteresis: float = _f(rule_defaults.RULE_HYSTERESIS, "rule: the count of objects above the level resets only "
                           "below baseline + hysteresis x (level - baseline).", min=0.0, max=1.0)
    min_objects: int = _f(rule_defaults.RULE_MIN_OBJECTS, "rule: objects above the level before a refit fires.",
                          min=1, max=1_000_000_000)
    baseline_objects: int = _f(rule_defaults.BASELINE_OBJECTS, "Objects after a (re)fit before the baseline is "
                               "taken (both detectors; the cusum calibrates on them).", min=1,
                               max=1_000_000_000)
    cooldown_seconds: float = _s(rule_defaults.COOLDOWN_SECONDS, "No automatic refit within this many seconds after "
                                 "one.", min=0.0)
    plane_axes: int = _f(plane_defaults.PLANE_AXES, "plane: leading monitored axes the captured share is measured in "
                         "(each sampled row's projection on them costs about (axes + 1) x n flops).", min=2,
                         max=1000)
    plane_rows: int = _f(plane_defaults.PLANE_ROWS, "plane: rows per batch (evenly spaced) whose projections feed "
                         "the captured share; a batch of fewer rows gives all of them.", min=1, max=10_000_000)
    plane_objects: int = _f(plane_defaults.PLANE_OBJECTS, "plane: objects per block whose captured share is one "
                            "CUSUM step.", min=4, max=1_000_000)
    plane_min_shift: float = _f(plane_defaults.PLANE_MIN_SHIFT, "plane: the fall of the captured share to detect "
                                "quickly, in baseline standard deviations of one block's share.", min=0.0,
                                max=1e6, exclusive_min=True)
    coverage_every_objects: int = _f(coverage_defaults.COVERAGE_EVERY_OBJECTS, "coverage: objects between two checks "
                                     "of the radius on a sample with mutual dissimilarities (feature rows, blocks); "
                                     "each costs one eigendecomposition of (landmarks + coverage_objects)^2.",
                                     min=1, max=MAX_ROWS)
    coverage_objects: int = _f(fit_defaults.COVERAGE_OBJECTS, "coverage: objects per checked sample (the fit "
                               "baseline's samples have this size).", min=20, max=10_000)
    coverage_min_shift: float = _f(coverage_defaults.COVERAGE_MIN_SHIFT, "coverage: the fall of the coverage to "
                                   "detect quickly, in baseline standard deviations of one check's coverage.",
                                   min=0.0, max=1e6, exclusive_min=True)


@dataclass
class ConsistencyConfig:
    """[consistency]: do input rows follow the model's landmark order? (docs/math.md §4.5)"""

    enabled: bool = _f(True, "Score rows given as dissimilarities or similarities (not features) by how well their "
                       "profile matches the landmarks' (docs/math.md §4.5): rows whose columns follow another order "
                       "(ascending ids, reversed, another model's landmarks) read 0, rows like the landmarks' own 1. "
                       "An alarm logs a WARNING, sets streamembed_input_consistency_alarm and makes /readyz report "
                       "the reason; `streamembed embed` exits 1 with it.")
    window_objects: int = _f(1000, "Rows scored in the window the consistency is averaged over.", min=10,
                             max=10_000_000)
    min_objects: int = _f(200, "Rows scored before the consistency is reported and can raise the alarm.", min=1,
                          max=1_000_000_000)
    sample_rows: int = _f(256, "Rows scored per batch (evenly spaced; each costs O(5n)).", min=1, max=10_000_000)
    alarm_below: float = _f(0.5, "Alarm when the consistency falls below this; it clears above (1 + alarm_below)/2.",
                            min=0.0, max=1.0, exclusive_min=True)


@dataclass
class RefitConfig:
    """[refit]: background landmark refits (docs/math.md §5)."""

    auto: bool = _f(True, "Refit when the drift trigger fires (manual refits: SIGUSR1 or `streamembed refit`).")
    n_landmarks: int = _f(0, "Landmarks of a refitted model (0: as many as now).", min=0, max=100_000, off=0)
    retain_versions: int = _f(3, "Older model versions kept to embed inputs whose landmark_version names them.",
                              min=0, max=100)
    timeout_seconds: float = _s(600.0, "Kill a refit worker that runs longer than this many seconds.", min=1.0)
    selection: str = _f(DEFAULT_SELECTION, "How a refit chooses its landmarks (docs/refits.md): adaptive (keep the "
                        "map, repair it or redraw it, whichever places the recent objects best for the least movement "
                        "of the old map; a refit that gains too little keeps the map), residual (keep the old "
                        "landmarks the stream still visits, add what the map does not explain), or a redraw of every "
                        "landmark by a landmark selection (max-variance, random, rpcholesky, kmeans++, kmedoids, "
                        "maxmin).", choices=REFIT_SELECTIONS)
    min_gain: float = _f(0.05, "selection = adaptive: install a refit only if its map holds at least this share more "
                         "of the recent objects' variance than the current map, net of the old landmarks' movement "
                         "(squared, in map radii; docs/refits.md). Manual refits install the best candidate whatever "
                         "it gains.",
                         min=0.0, max=10.0)
    request_seconds: float = _s(300.0, "A refit of a stream whose rows carry dissimilarities alone (no objects, no "
                                "block) asks the producer for the candidates' mutual dissimilarities (a refit "
                                "request on the model channel: a file under output.root/refit-requests, or a "
                                "message on kafka.model_topic; docs/objects.md) and waits this long for the "
                                "answer; 0: never ask.", min=0.0)
    request_candidates: int = _f(1000, "Most recent rows a refit request names as candidates (the producer "
                                 "computes their k x k mutual dissimilarities).", min=20, max=20_000)
    unversioned_rows: str | int = _f(START, "After a refit, the landmark version of a row that neither states "
                                     "its landmark_version nor names its landmarks: start (the version the "
                                     "configured model had, model.path's or the generator's: the one producers "
                                     "measured against before any refit; placed by the retained model, flagged "
                                     "retained_model), a version number, or reject (the ambiguous_landmarks dead "
                                     "letter). A version no longer retained gives ambiguous_landmarks too. Rows "
                                     "carrying objects are measured by the daemon and are never ambiguous.",
                                     min=1, max=2**62, words=("start", "reject"))
    drain_seconds: float = _s(600.0, "Batch mode (directory.exit_when_idle): when the input ends with a refit pending "
                              "or running, wait this long for it before exiting (0: do not wait).", min=0.0)
    model_dir: str = _f("", "Versioned models model-v<N>.npz; empty: <root>/models.")
    history_path: str = _f("", "JSON lines record of every refit; empty: <root>/model-history.jsonl.")


@dataclass
class TrustConfig:
    """[trust]: how much to trust each placement (docs/math.md §9)."""

    coverage: float = _f(DEFAULT_COVERAGE, "Probability that an object's full-MDS position lies within its radius "
                         "(the output's "
                         "radius column; docs/math.md §9): the level a model's radius is calibrated to at fit time "
                         "(`streamembed fit --coverage`, a generator-fitted model), and the level the daemon states "
                         "with a loaded model, whose stored calibration it rescales. Strictly between 0 and 1.",
                         min=0.0, max=1.0, exclusive_min=True, exclusive_max=True)
