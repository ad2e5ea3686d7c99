"""Fitting the landmark map: the spectrum, refined and non-metric maps, choosing d (docs/math.md §1, §3.5–3.6)."""
