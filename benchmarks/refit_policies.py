"""Refit policies on streams that change in known ways: the table behind ``refit.selection = "adaptive"``.

    python -m benchmarks.refit_policies [--seeds 5] [--policies adaptive,residual,...] [--json out.json]

A map is fitted on an old population (100 landmarks, d = 2, uniform random
among it); a stream then brings a reservoir of recent objects and the refit
runs on old landmarks ∪ reservoir with each ``refit.selection`` (``none``:
no refit). The objects of the stream that the reservoir did not hold are the
test set: the current traffic (the reservoir holds 600 objects, or half the
stream when it is shorter). Scenarios:

* digits (scikit-learn, 64 pixel features, Euclidean), old population classes 0–4:
  ``new classes, abrupt`` (the stream brings classes 5–9), ``new classes, gradual``
  (the reservoir's share of classes 5–9 rises from 0 to 1; the test set is 5–9),
  ``rotation`` (90° rotations in 32 random coordinate planes of the pixel space),
  ``scale ×2``, ``in-plane shift`` (10 units along the old population's first
  principal axis), ``stationary`` (classes 0–4 again) and ``stationary, all
  classes`` (the map and the stream both from all ten classes);
* words (2,400 English words of stdlib docstrings, Levenshtein), old population
  the words of 4–7 letters: ``new classes, abrupt`` (words of 9–12 letters),
  ``stationary``.

Columns: 5-NN accuracy of the test objects' classes in the map (digits: the
digit, words: the length), their trustworthiness (k = 10) against their input
dissimilarities, Procrustes share to a full classical MDS of the test objects,
movement of 300 old-population objects (RMS displacement / the old map's RMS
radius; refits are aligned, so this is what a user of old coordinates sees),
the share of runs that installed a new version, and the refit's seconds.
Medians over the seeds.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.spatial.distance as ssd

from streamembed import LandmarkMDS
from streamembed.core.refit.refit import REFIT_SELECTIONS, candidate_dissimilarities, refit
from streamembed.quality import classical_mds, procrustes_share, trustworthiness_continuity

RESERVOIR = 600
LANDMARKS = 100


def knn_accuracy(Y: np.ndarray, labels: np.ndarray, k: int = 5) -> float:
    """Leave-one-out k-NN accuracy of ``labels`` from positions Y (majority vote, ties to the smallest label)."""
    D = ssd.squareform(ssd.pdist(Y))
    np.fill_diagonal(D, np.inf)
    nn = np.argpartition(D, k, axis=1)[:, :k]
    votes = labels[nn]
    pred = np.array([np.bincount(v).argmax() for v in votes])
    return float((pred == labels).mean())


def digits_scenarios(rng: np.random.Generator) -> dict:
    from sklearn.datasets import load_digits

    dg = load_digits()
    X, y = dg.data.astype(np.float64), dg.target
    old_idx, new_idx = np.flatnonzero(y < 5), np.flatnonzero(y >= 5)
    pool = X[old_idx]
    p = X.shape[1]
    R = np.zeros((p, p))
    for a, b in rng.permutation(p).reshape(-1, 2):
        R[a, b], R[b, a] = 1.0, -1.0
    axis = np.linalg.svd(pool - pool.mean(axis=0), full_matrices=False)[2][0]
    s_old, s_new = rng.permutation(old_idx), rng.permutation(new_idx)
    ramp = np.concatenate([rng.choice(old_idx, RESERVOIR // 2, replace=False), s_new[:RESERVOIR // 2]])
    ramp = ramp[np.argsort(np.linspace(0, 1, ramp.size) + 0.3 * rng.random(ramp.size))]
    allp = rng.permutation(len(X))
    return {
        "new classes, abrupt": (pool, X[s_new], y[s_new]),
        "new classes, gradual": (pool, np.vstack([X[ramp], X[s_new[RESERVOIR // 2:]]]),
                                 np.concatenate([y[ramp], y[s_new[RESERVOIR // 2:]]])),
        "rotation": (pool, X[s_old] @ R, y[s_old]),
        "scale ×2": (pool, 2.0 * X[s_old], y[s_old]),
        "in-plane shift": (pool, X[s_old] + 10.0 * axis, y[s_old]),
        "stationary": (pool, X[s_old], y[s_old]),
        "stationary, all classes": (X[allp[:900]], X[allp[900:]], y[allp[900:]]),
    }


def words_scenarios(rng: np.random.Generator) -> dict:
    from benchmarks import datasets as dsm
    from benchmarks.editdistance import levenshtein_matrix

    found: set[str] = set()  # the words of datasets.english_words, 2,400 of them, with their lengths as classes
    for modname in dsm.WORD_MODULES:
        for _, doc in dsm._public_members(modname):
            found.update(dsm._WORD.findall(doc))
    chosen = dsm._evenly(list(found), 2400)
    lengths = np.array([len(w) for w in chosen])
    ds = dsm.Dataset("english_words", D=levenshtein_matrix(chosen).astype(np.float64), labels=lengths)
    short, long_ = np.flatnonzero(lengths <= 7), np.flatnonzero(lengths >= 9)
    s_short, s_long = rng.permutation(short), rng.permutation(long_)
    half = s_short.size // 2
    return {"D": ds.D,
            "new classes, abrupt": (s_short[:half], s_long, lengths[s_long]),
            "stationary": (s_short[:half], s_short[half:], lengths[s_short[half:]])}


def run_one(D_all: np.ndarray, pool: np.ndarray, stream: np.ndarray, labels: np.ndarray, policy: str,
            seed: int) -> dict:
    """One refit on index sets into D_all: the old pool, the stream (reservoir first, then the test set)."""
    rng = np.random.default_rng(seed)
    L = np.sort(rng.choice(pool, LANDMARKS, replace=False))
    old = LandmarkMDS(2).fit(D_all[np.ix_(L, L)], landmark_ids=[f"o{i}" for i in L]).model_
    reservoir = min(RESERVOIR, len(stream) // 2)
    res_idx, test = stream[:reservoir], stream[reservoir:]
    cs = candidate_dissimilarities(old.landmark_ids, [f"s{i}" for i in res_idx],
                                   old_dissimilarities=D_all[np.ix_(L, L)],
                                   cross_to_landmarks=D_all[np.ix_(res_idx, L)],
                                   mutual=D_all[np.ix_(res_idx, res_idx)])
    t0 = time.perf_counter()
    new, installed, outcome = old, False, "no refit"
    new_L = L
    if policy != "none":
        r = refit(old, cs.D, cs.ids, selection=policy, seed=seed)
        outcome = r.outcome
        if r.model is not None:
            new, installed = r.model, True
            index = {f"o{i}": i for i in L} | {f"s{i}": i for i in res_idx}
            new_L = np.array([index[i] for i in r.new_ids])
    seconds = time.perf_counter() - t0
    Y = new.place(D_all[np.ix_(test, new_L)]).y
    D_test = D_all[np.ix_(test, test)]
    probe = rng.choice(pool, min(300, pool.size), replace=False)
    y_old = old.place(D_all[np.ix_(probe, L)]).y
    y_new = new.place(D_all[np.ix_(probe, new_L)]).y
    radius = np.sqrt(np.square(y_old - y_old.mean(axis=0)).sum(axis=1).mean())
    return {"acc": knn_accuracy(Y, np.asarray(labels[reservoir:])),
            "trust": trustworthiness_continuity(D_test, Y, 10)[0],
            "procrustes": procrustes_share(Y, classical_mds(D_test, 2).Y),
            "movement": float(np.sqrt(np.square(y_new - y_old).sum(axis=1).mean()) / radius),
            "installed": installed, "outcome": outcome, "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--policies", default="none,adaptive,residual,max-variance,kmeans++,random,maxmin")
    ap.add_argument("--datasets", default="digits,words")
    ap.add_argument("--json")
    args = ap.parse_args()
    policies = args.policies.split(",")
    bad = [p for p in policies if p != "none" and p not in REFIT_SELECTIONS]
    if bad:
        raise SystemExit(f"unknown policies {bad}; choose from none, {', '.join(REFIT_SELECTIONS)}")
    rows = []
    print("| dataset | drift | policy | new-version share | 5-NN accuracy | trustworthiness | Procrustes to full CMDS "
          "| old-object movement | refit s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for dataset in args.datasets.split(","):
        for seed in range(args.seeds):
            rng = np.random.default_rng(1000 + seed)
            if dataset == "digits":
                scen = digits_scenarios(rng)
                built = {}
                for name, (pool_X, stream_X, labels) in scen.items():
                    F = np.vstack([pool_X, stream_X])
                    built[name] = (ssd.squareform(ssd.pdist(F)), np.arange(len(pool_X)),
                                   np.arange(len(pool_X), len(F)), labels)
            else:
                scen = words_scenarios(rng)
                D = scen.pop("D")
                built = {name: (D, pool, stream, labels) for name, (pool, stream, labels) in scen.items()}
            for name, (D_all, pool, stream, labels) in built.items():
                for policy in policies:
                    r = run_one(D_all, pool, stream, labels, policy, seed)
                    rows.append({"dataset": dataset, "drift": name, "policy": policy, "seed": seed, **r})
        for name in dict.fromkeys(r["drift"] for r in rows if r["dataset"] == dataset):
            for policy in policies:
                sel = [r for r in rows if r["dataset"] == dataset and r["drift"] == name and r["policy"] == policy]
                med = {k: float(np.median([r[k] for r in sel])) for k in ("acc", "trust", "procrustes", "movement",
                                                                         "seconds")}
                share = np.mean([r["installed"] for r in sel])
                print(f"| {dataset} | {name} | {policy} | {share:.2f} | {med['acc']:.3f} | {med['trust']:.3f} | "
                      f"{med['procrustes']:.3f} | {med['movement']:.3f} | {med['seconds']:.2f} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
