"""Refits: landmark selection, refit policy, refitting, Procrustes alignment (docs/math.md §5, §7.5)."""
