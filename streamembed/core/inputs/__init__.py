"""Inputs: checks, the input pipeline (similarities, geodesics, additive constant), centring (docs/math.md §2)."""
