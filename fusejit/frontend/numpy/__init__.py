"""The NumPy surface inside ``@fuse``: each module implements a family of NumPy functions over
proxies and registers them with the tracer's dispatch table (``frontend.trace``)."""
