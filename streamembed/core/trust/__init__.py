"""Per-object error radii: how far an object may be from where a full classical MDS would put it (docs/math.md §9)."""
