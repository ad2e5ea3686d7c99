"""Placing new objects: the Placer, method routing, projection, RR, the range guard (docs/math.md §3)."""
