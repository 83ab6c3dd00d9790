"""The NumPy surface inside ``@fuse``: each module implements a family of NumPy functions over
proxies and registers them with the tracer's dispatch table (``frontend.dispatch``) when
imported. Importing this package registers all of them (``fusejit/__init__.py`` does, once).

The order is the registration order: where two modules register the same NumPy function the
later one wins (``einsum`` takes over ``np.einsum`` from ``linalg``, which handles its matrix
products), so it is kept as written.
"""

from fusejit.frontend.numpy import complex, shape, reductions, api  # noqa: F401
from fusejit.frontend.numpy import build, reduce, elementwise, gather  # noqa: F401
from fusejit.frontend.numpy import split, scan, svd  # noqa: F401
from fusejit.frontend.numpy import linalg, einsum  # noqa: F401 - einsum after linalg
from fusejit.frontend.numpy import window  # noqa: F401
from fusejit.frontend.numpy import local  # noqa: F401 - out= an array made inside
from fusejit.frontend import conversions  # noqa: F401 - np.asarray(traced) while tracing
