"""Tracing: the user's Python runs once over ``TensorProxy`` values and leaves an ``ir.Graph``.

``trace`` holds the tracer and the proxy, ``operators`` and ``ufuncs`` the Python operators and
NumPy ufuncs, ``captured`` and ``overlay`` the state a function reads from outside its arguments;
``numpy/`` registers the NumPy functions and ndarray methods the tracer dispatches to."""
