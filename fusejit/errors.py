"""User-facing error classes.

Every class also subclasses the builtin exception a NumPy user would expect for the same mistake,
so ``except TypeError`` keeps working, and names what went wrong and what to write instead.
"""

from __future__ import annotations


class FusejitError(Exception):
    """Base class of every error fusejit raises on purpose."""


class TracerConversionError(FusejitError, TypeError):
    """A traced value was used where Python needs a concrete value (``if``, ``bool``, ``float``)."""

    def __init__(self, what: str, conversion: str) -> None:
        hint = {
            "bool": "Python control flow on traced values is not traced; "
            "write the branch as data, e.g. `np.where(cond, a, b)`, or make the argument static "
            "with @fuse(static_argnums=...)",
            "float": "the value is only known on the device; keep it an array "
            "(e.g. `x.astype(np.float64)`) or pass it as a static argument",
            "int": "the value is only known on the device; shapes and indices must be Python "
            "ints known at trace time (use `x.shape`), or pass the value as a static argument",
            "array": "a traced value cannot become a NumPy array inside a fused function; "
            "use NumPy functions on it directly (they are traced)",
        }[conversion]
        super().__init__(f"cannot convert {what} to a Python {conversion}: {hint}")


class TracerBoolConversionError(TracerConversionError, ValueError):
    """``if traced_array:``: also a ValueError, the class NumPy raises for the truth value of an
    array with more than one element, so ``except ValueError`` code keeps working."""

    def __init__(self, what: str) -> None:
        super().__init__(what, "bool")


class UnsupportedOperationError(FusejitError, NotImplementedError):
    """A NumPy function, ufunc method or argument combination fusejit cannot trace."""


class IntRangeError(UnsupportedOperationError, OverflowError):
    """Python arithmetic inside a fused function on a dynamic int argument beyond int64, which
    fusejit computes in int64; also an OverflowError, what NumPy raises for most uses of such
    a value (``int8_array + n``). Raised while tracing, before anything is launched."""


class UnsupportedAttributeError(UnsupportedOperationError, AttributeError):
    """An ndarray method or attribute fusejit cannot trace (``x.sort()``); also an
    AttributeError, so ``hasattr`` and ``getattr(x, name, default)`` keep working."""


class BroadcastError(FusejitError, ValueError):
    """Operand shapes that NumPy would refuse to broadcast together."""


class ContextMismatchError(FusejitError, ValueError):
    """Device arrays from different OpenCL contexts passed to one call."""


class DeviceUnavailableError(FusejitError, RuntimeError):
    """The chosen device cannot be used here (no Vulkan loader or adapter, no OpenCL device)."""


class UnsupportedDTypeError(FusejitError, TypeError):
    """A dtype fusejit cannot compute with, or one the device lacks (float64 without fp64)."""


class ReadOnlyError(FusejitError, ValueError):
    """A write into a read-only or broadcast view (NumPy: 'output array is read-only')."""


class CapturedStateError(FusejitError, TypeError):
    """State the function reads from outside its arguments that fusejit cannot guard (too large
    to compare on each call, or of a kind it cannot see change): pass it as an argument."""


class KernelBuildError(FusejitError, RuntimeError):
    """A kernel compiler rejected generated source; shows the numbered source and the log."""

    def __init__(self, name: str, source: str, log: str, compiler: str = "OpenCL") -> None:
        numbered = "\n".join(f"{i + 1:4d} | {line}" for i, line in enumerate(source.splitlines()))
        super().__init__(
            f"{compiler} build of {name} failed. This is a fusejit bug; please report it with the "
            f"source below.\n--- source ---\n{numbered}\n--- compiler log ---\n{log.strip()}"
        )
        self.source = source
        self.log = log


class RandomStateError(FusejitError, TypeError):
    """``np.random`` was called while tracing: its numbers would be baked into the kernel as a
    constant (the same "random" values on every call). Use ``fusejit.random`` with a key."""

    def __init__(self, call: str) -> None:
        super().__init__(
            f"{call} was called while tracing a fused function: its result would be baked into "
            "the kernel as a constant, the same numbers on every call. Draw random numbers with "
            "fusejit.random and pass the key as an argument, e.g.\n"
            "    @fuse\n"
            "    def dropout(x, key):\n"
            "        keep = fusejit.random.bernoulli(key, 0.9, x.shape)\n"
            "        return np.where(keep, x / 0.9, 0)\n"
            "    dropout(x, fusejit.random.key(step))   # a new key does not recompile\n"
            "(or draw the numbers outside the fused function and pass them in)")
        self.call = call


class ValidationError(FusejitError, AssertionError):
    """validate=True found a result further from the float64 reference than its ULP bound."""


class InternalError(FusejitError, RuntimeError):
    """An unexpected error inside fusejit: always a fusejit bug, never the caller's mistake.
    The message names the function and the original error, which is chained as ``__cause__``."""


class ScheduleError(InternalError):
    """A lowered module breaks a kernel-order or no-race rule (``Module.verify``)."""


class DeviceIndexError(FusejitError, IndexError):
    """An index array read on the device (an argument, or computed by the function) held a
    value outside the axis it indexes (``x[idx]``, ``np.take``, ``take_along_axis``): the
    kernel flags it and the call raises this IndexError, as NumPy would, instead of returning
    what the clamped read gave."""


class DeviceMemoryError(FusejitError, MemoryError):
    """A buffer a call needs is larger than the device can allocate (its maximum single
    allocation or its global memory); raised before anything is allocated or launched."""


class MatmulPrecisionError(FusejitError, ValueError):
    """``@fuse(matmul_precision=...)`` got a value that is not 'highest', '3xtf32' or 'tf32'."""


__all__ = [
    "BroadcastError",
    "CapturedStateError",
    "ContextMismatchError",
    "DeviceIndexError",
    "DeviceMemoryError",
    "FusejitError",
    "IntRangeError",
    "InternalError",
    "MatmulPrecisionError",
    "KernelBuildError",
    "RandomStateError",
    "ReadOnlyError",
    "ScheduleError",
    "TracerBoolConversionError",
    "TracerConversionError",
    "UnsupportedAttributeError",
    "UnsupportedDTypeError",
    "UnsupportedOperationError",
    "ValidationError",
]
