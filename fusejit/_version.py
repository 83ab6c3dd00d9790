"""fusejit's version, in the lowest layer: the program cache, the trace cache and bundles key
on it, and those modules sit far below the root package that re-exports it."""

__version__ = "0.1.0"
