"""What was built, and why: ``Lowered`` (``f.lower``), ``explain``, ``validate=True`` and the
supported-API table of the docs."""
