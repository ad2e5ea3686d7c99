"""Bounded jobs built on the streaming loop: :mod:`~streamembed.jobs.backfill` (files on a Dask cluster)."""
