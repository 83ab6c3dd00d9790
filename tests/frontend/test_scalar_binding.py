"""By-value kernel arguments bound as packed bytes (runtime/opencl/scalar_args.py), the last
call's bytes reused for the same argument objects, and all derived scalars evaluated in one pass
(runtime/derived.py): values against NumPy for every scalar dtype, and the keys that equality
would get wrong (``0.0 == -0.0``, ``1 == True``) never sharing a cached value."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import fuse
from fusejit.runtime.opencl import scalar_args
from fusejit.testing import assert_matches

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32,
          np.uint32, np.int64, np.uint64, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_scalars_of_every_dtype(queue, dtype: type) -> None:
    x = np.arange(1, 9).astype(dtype)
    f = fuse(lambda x, s: x * s)
    d = cla.to_device(queue, x)
    for v in (1, 0, 5) if dtype is not np.bool_ else (True, False):
        s = np.array(v).astype(dtype)[()]
        assert_matches(f(d, s), x * s, what=f"{dtype.__name__} * {v!r}")


def test_python_scalars_change_between_calls(queue) -> None:
    x = np.linspace(-2, 2, 16).astype(np.float32)
    d = cla.to_device(queue, x)
    f = fuse(lambda x, a, k, b: x * a + k - b)
    for a, k, b in [(0.5, 3, True), (0.5, 3, True), (-1.25, 7, False), (1e30, -2, True),
                    (float("inf"), 0, False), (0.5, 3, True)]:
        assert_matches(f(d, a, k, b), x * a + k - b, what=f"{a}, {k}, {b}")


def test_signed_zero_and_nan_are_not_confused(queue) -> None:
    x = np.ones(8, np.float32)
    d = cla.to_device(queue, x)
    f = fuse(lambda x, s: x / s)  # 1/0.0 = inf, 1/-0.0 = -inf
    with np.errstate(divide="ignore", invalid="ignore"):
        for s in (0.0, -0.0, 0.0, float("nan"), -0.0):
            assert_matches(f(d, s), x / s, what=repr(s))


def test_derived_scalars_follow_their_arguments(queue) -> None:
    x = np.linspace(0.5, 1.5, 32).astype(np.float32)
    d = cla.to_device(queue, x)

    def adam_like(x, b1, b2, t):
        return x / (1.0 - b1 ** t), x * (1.0 - b2 ** t), x * (b1 * b2) ** t

    f = fuse(adam_like)
    for t in (1, 2, 2, 3, 10, 1000, 2):
        for got, want in zip(f(d, 0.9, 0.999, t), adam_like(x, 0.9, 0.999, t), strict=True):
            assert_matches(got, want, what=f"t={t}")
    lowered = f.lower(d, 0.9, 0.999, 3)
    assert sum(p.kind == "derived" for p in lowered.graph.params) >= 2


def test_derived_scalars_of_numpy_scalars_and_zero_signs(queue) -> None:
    x = np.ones(4, np.float64)
    d = cla.to_device(queue, x)
    f = fuse(lambda x, a, b: x * (a * b + a))
    for a, b in [(np.float32(0.0), np.float32(-1.0)), (np.float32(-0.0), np.float32(-1.0)),
                 (np.float64(2.5), np.float64(3)), (-0.0, 0.0), (0.0, 0.0)]:
        assert_matches(f(d, a, b), x * (a * b + a), what=f"{a!r}, {b!r}")
        assert np.signbit(f(d, a, b).get()).tolist() == np.signbit(x * (a * b + a)).tolist()


def test_offsets_and_host_inputs_bind_by_value(queue) -> None:
    x = np.arange(40, dtype=np.float32)
    d = cla.to_device(queue, x)
    f = fuse(lambda x, s: x * s)
    for start in (0, 3, 7, 3):
        assert_matches(f(d[start:start + 16], 2.0), x[start:start + 16] * 2.0)
    assert_matches(f(x[5:21], 3), x[5:21] * 3)  # a NumPy input: the interpreter's run() path


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint8,
                                   np.int32, np.uint64, np.bool_, np.complex64])
def test_packer_is_the_scalars_bytes(dtype: type) -> None:
    kernel = {np.float16: np.float32, np.bool_: np.uint8}.get(dtype, dtype)
    for v in (0, 1, 3):
        value = np.array(v).astype(kernel)[()]
        assert scalar_args.packer(np.dtype(dtype))(value) == value.tobytes()
