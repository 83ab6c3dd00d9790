"""The traced program: hash-consed nodes and graphs (``graph``), the op table with each op's
NumPy reference (``ops``), dtypes, shapes, symbolic extents and index maps, and the NumPy
interpreter of a graph (``reference``). Depends on nothing above it."""
