"""Monitoring: residuals, window bounds, the non-Euclidean threshold, drift, CUSUM (docs/math.md §4, §7)."""
