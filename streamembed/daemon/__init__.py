"""The daemon around the streaming loop: one composition root (``app``, ``assembly``, ``model_setup``),
the refits and the run state. Its operations surface (server, metrics, map, history, logs) is ``streamembed.ops``."""
