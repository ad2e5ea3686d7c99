"""Stress, Sammon and L1 placement, certified minima (docs/math.md §3.4)."""
