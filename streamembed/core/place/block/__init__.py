"""Block restricted reconstruction: packing, trust-region Newton, starts, certificate (docs/math.md §3.3)."""
