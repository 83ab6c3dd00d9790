"""Kernel order and races with in-place writes (issue 9, classes 1-3): every kernel runs after
the kernels whose results it loads and before any kernel that overwrites what it reads; no
kernel writes an element another of its work-items reads; ``Module.verify`` proves both on
every lowered module; internal errors reach users as ``InternalError``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fusejit
import fusejit.passes.schedule
from fusejit import InternalError, ScheduleError, fuse
from fusejit.testing import assert_matches


def run_both(fn, make, dev=None, calls=2):
    """Run ``fn`` in NumPy and fused on fresh copies of ``make()``, ``calls`` times (a later
    call must not see an earlier one's results); compare results and arguments."""
    f = fuse(fn)
    for _ in range(calls):
        want_args, got_args = make(), make()
        want = fn(*want_args)
        if dev is not None:
            got_args = [dev(a) if isinstance(a, np.ndarray) else a for a in got_args]
        got = f(*got_args)
        for w, g in zip(want_args, got_args):
            close(g.get() if hasattr(g, "get") else g, w, "argument after the call")
        if want is not None:
            for g, w in zip(got if isinstance(want, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                close(g, w, "result")
    return f


def close(got, want, what):
    """Exact for integers; floats within summation-order rounding (sums, means feed them)."""
    want = np.asarray(want)
    atol = 0.0
    if want.dtype.kind == "f" and want.size:
        atol = 1e-5 * max(1.0, float(np.nanmax(np.abs(want.astype(np.float64)))))
    assert_matches(got, want, atol=atol, what=what)


def arrays(rng, dtype, *shapes):
    def make():
        out = []
        for s in shapes:
            a = rng.integers(-20, 20, size=s) if np.dtype(dtype).kind in "iu" else \
                rng.standard_normal(s)
            out.append(np.abs(a).astype(dtype) if np.dtype(dtype).kind == "u" else
                       a.astype(dtype))
        return out
    saved = make()
    return lambda: [a.copy() for a in saved]


# -- 1. a kernel reads what an in-place write changes only after that write ----------------------

def sub_then_sum(x, y):
    x -= 1
    return y[None], x.sum()


def reversed_out_then_mean(x, y):
    np.add(x[::-1], 2, out=x[::-1])
    return x.mean(), y * 2


def strided_set_then_max(x, y):
    x[::2] = 0
    return y[None] + 1, x.max(), x.min()


def reduce_of_write_then_write(x, y):
    x += 1
    s = x.sum()
    x -= s
    return y[None], s


def write_reads_reduction(x, y):
    y *= 2
    x -= x.max()
    return x.sum(), y


ORDER_CASES = [sub_then_sum, reversed_out_then_mean, strided_set_then_max,
               reduce_of_write_then_write, write_reads_reduction]


def spread(fns, shapes, dtypes, per_fn=2):
    """``per_fn`` (function, shape, dtype) cases per function, cycling through the shapes and
    dtypes so that every shape and dtype meets several functions (a full product would
    compile hundreds of kernels)."""
    out = []
    for i, fn in enumerate(fns):
        for j in range(per_fn):
            k = i * per_fn + j
            out.append(pytest.param(fn, shapes[k % len(shapes)], dtypes[(k + i) % len(dtypes)],
                                    id=f"{fn.__name__}-{k}"))
    return out


@pytest.mark.parametrize("fn,shapes,dtype", spread(
    ORDER_CASES, [((1,), (1,)), ((8,), (8,)), ((33,), (1,)), ((5000,), (5000,)),
                  ((64,), (3,)), ((3, 5), (5,))], [np.float32, np.int32, np.int64, np.uint8]))
def test_kernels_run_after_the_writes_they_read(fn, shapes, dtype, rng):
    if fn is reversed_out_then_mean and np.dtype(dtype).kind in "iu":
        dtype = np.float64  # np.add(x, 2, out=x) of ints is fine, but mean wants a float
    run_both(fn, arrays(rng, dtype, *shapes))


@pytest.mark.parametrize("fn", [sub_then_sum, strided_set_then_max])
def test_order_on_device_views(fn, rng, dev):
    run_both(fn, arrays(rng, np.float32, (40,), (40,)), dev)


def test_order_with_reordering_needs_no_staging_kernel():
    low = fuse(sub_then_sum).lower(np.ones(8, np.float32), np.ones(8, np.float32))
    assert len(low.kernels) == 2  # the reduction reads the old x, then x is written in place
    assert not any("temporary" in k.reason for k in low.kernels)


# -- 2. no kernel writes an element another work-item of it reads --------------------------------

def reversed_sum_then_add(x, h):
    x[...] = (x + h)[::-1]
    h += 1


def reversed_copy_then_scale(x, h):
    x[...] = h[::-1] * 2
    h *= 3


def strided_region_swap(x, h):
    x[:-1:2] = h[1::2]
    h[1::2] = 0


def transpose_then_add(x, h):
    x[...] = h.T
    h += 1


def shifted_then_write(x, h):
    np.add(x[:-1], h[1:], out=x[:-1])
    h[:-1] = -h[:-1]


def reversed_self_copy(x, h):
    x[::-1] = x  # the staged value is the argument itself
    h += x


RACE_CASES = [reversed_sum_then_add, reversed_copy_then_scale, strided_region_swap,
              shifted_then_write, reversed_self_copy]


@pytest.mark.parametrize("fn,n,dtype", spread(
    RACE_CASES, [2, 17, 64, 4099], [np.float32, np.int8, np.uint16, np.int64, np.float16]))
def test_no_write_races_a_read_of_the_same_kernel(fn, n, dtype, rng):
    run_both(fn, arrays(rng, dtype, (n,), (n,)))


def test_a_racing_write_is_staged_and_the_other_stays_in_place():
    low = fuse(reversed_sum_then_add).lower(np.ones(64, np.float32), np.ones(64, np.float32))
    # x's write reads h reversed, h's own write reads h in order: one kernel computes both
    # into temporaries (h is read reversed there), two copies write them back
    assert len(low.kernels) == 3
    assert all("staged through a temporary" in k.reason for k in low.kernels[1:])
    low = fuse(reversed_copy_then_scale).lower(np.ones(8, np.int8), np.ones(8, np.int8))
    assert len(low.kernels) == 2  # only h, read reversed by x's store, is staged


@pytest.mark.parametrize("n", [1, 32])
def test_transposed_read_of_a_written_square(n, rng):
    run_both(transpose_then_add, arrays(rng, np.float32, (n, n), (n, n)))


@pytest.mark.parametrize("fn", RACE_CASES[:2] + RACE_CASES[-1:])
def test_races_on_device_arrays(fn, rng, dev):
    run_both(fn, arrays(rng, np.float32, (64,), (64,)), dev)


# -- 3. reductions feeding in-place epilogues -------------------------------------------------------

def add_then_add_sum(x, y):
    y += 1
    y += x.sum(0)


def scale_then_add_max(x, y):
    y *= 2
    np.add(y, x.max(0), out=y)


def set_from_mean(x, y):
    y[...] = y * 2 + x.mean(0)


@pytest.mark.parametrize("fn,shape,dtype", spread(
    [add_then_add_sum, scale_then_add_max, set_from_mean],
    [(3, 4), (5, 64), (2, 1024), (7, 13), (100, 33)], [np.float32, np.float64, np.int32]))
def test_reduction_into_an_in_place_epilogue(fn, shape, dtype, rng, has_fp64):
    if fn is set_from_mean and np.dtype(dtype).kind == "i":
        # the mean of ints is float64: NumPy refuses the same_kind cast into y, and so must we
        x, y = arrays(rng, dtype, shape, shape[1:])()
        with pytest.raises(TypeError):
            fn(x.copy(), y.copy())
        with pytest.raises(TypeError):
            fuse(fn)(x, y)
        return
    if np.dtype(dtype) == np.float64 and not has_fp64:
        pytest.skip("no fp64 on this device")
    run_both(fn, arrays(rng, dtype, shape, shape[1:]))


def test_reduction_over_two_axes_into_in_place_epilogue(rng):
    def f(x, y):
        y += 1
        y += x.sum((0, 2))
    run_both(f, arrays(rng, np.float32, (3, 16, 5), (16,)))


# -- the verifier ---------------------------------------------------------------------------------

def test_verify_rejects_a_kernel_order_that_reads_before_the_write():
    x, y = np.ones(8, np.float32), np.ones(8, np.float32)

    def f(x, y):
        x -= 1
        return y * 2, x.sum(), x.max(0, keepdims=True) + y
    low = fuse(f).lower(x, y)
    low.module.verify(low.graph, low.plan)
    bad = dataclasses.replace(low.module, kernels=low.module.kernels[::-1])
    with pytest.raises(ScheduleError, match="reads"):
        bad.verify(low.graph, low.plan)


def test_verify_rejects_a_racing_in_place_write(monkeypatch):
    monkeypatch.setattr(fusejit.passes.schedule, "race", lambda *a: None)

    def f(x):
        x[1:] += x[:-1]
    with pytest.raises(ScheduleError, match="compile .*f: ScheduleError: .*work-items read "
                       "elements.*fusejit bug") as info:
        fuse(f).lower(np.arange(10.0))
    assert isinstance(info.value.__cause__, ScheduleError)


def test_verify_rejects_a_write_before_a_read(monkeypatch):
    real = fusejit.passes.schedule._stable_toposort
    monkeypatch.setattr(fusejit.passes.schedule, "_stable_toposort",
                        lambda after: real([set() for _ in after])[::-1])
    with pytest.raises(ScheduleError, match="old value of argument 0"):
        fuse(sub_then_sum).lower(np.ones(8, np.float32), np.ones(3, np.float32))


# -- no internal error reaches a user as itself -----------------------------------------------------

def test_internal_errors_are_named_and_chained(monkeypatch):
    # a plan whose kernels load no temporaries: lowering reaches a reduction it cannot compute
    monkeypatch.setattr(fusejit.codegen.source, "loaded", lambda *a: {})

    def my_function(x, y):
        return y * x.sum()
    with pytest.raises(InternalError, match=r"my_function.*AssertionError: reduction.*"
                       "fusejit bug") as info:
        fuse(my_function)(np.ones(3), np.ones(5))
    assert isinstance(info.value.__cause__, AssertionError)


def test_the_users_own_assertion_is_not_an_internal_error():
    def f(x):
        assert x.shape == (2,), "wrong shape"
        return x
    with pytest.raises(AssertionError, match="wrong shape") as info:
        fuse(f)(np.ones(3))
    assert not isinstance(info.value, InternalError)


def test_autotuning_does_not_apply_an_in_place_write_twice(monkeypatch, tmp_path):
    # tuning a kernel reruns the kernels before it: they must not write arguments
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))

    def f(x, y):
        x += x.sum()  # one reduction kernel writing x in place, before the big kernel
        return y * 2
    fused = fuse(f, autotune=True)
    y = np.ones(1 << 22, np.float32)  # (NumPy arguments: the path that tunes)
    for _ in range(3):  # the second call tunes
        x = np.ones(10, np.float32)
        fused(x, y)
        assert_matches(x, np.full(10, 11, np.float32))


@pytest.mark.parametrize("device_arrays", [False, True])
def test_autotuning_runs_on_the_second_call_on_every_path(device_arrays, monkeypatch, tmp_path,
                                                          queue):
    # device-array calls take the generated fast launchers: the second call must still tune
    # (a test there compared bound methods with `is`, so those calls never tuned)
    from fusejit.runtime import autotune
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", False)
    tuned = []
    real = autotune.tune
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: tuned.append(a[2]) or real(*a, **k))
    fused = fuse(lambda x: x * 2 + 1, autotune=True)
    host = np.arange(autotune.MIN_ITEMS * 16, dtype=np.float32)  # (items are vectors)
    x = pyopencl_array(queue, host) if device_arrays else host
    for call in range(4):
        out = fused(x)
        assert len(tuned) == (call > 0), call
        assert_matches(out.get() if device_arrays else out, host * 2 + 1)


def pyopencl_array(queue, host):
    import pyopencl.array as cla
    return cla.to_device(queue, host)


# -- a write into a function's result never reaches the argument it was computed from --------------

FRESH = [np.nan_to_num, np.positive, np.copy, np.round, np.fix, np.abs,
         lambda a: a.astype(a.dtype), lambda a: a * 1, lambda a: a + 0,
         lambda a: np.maximum(a, a)]


@pytest.mark.parametrize("make", FRESH)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_writing_a_new_array_leaves_its_source_alone(make, dtype, rng):
    # NumPy returns new arrays here even where the values are the argument's (nan_to_num of
    # integers): `v += 1` must not write the argument (found by the fuzzer)
    def f(a):
        v = make(a)
        v[...] = ~v if v.dtype == np.bool_ else v + 1
        return v
    try:
        make(np.ones(2, dtype))
    except TypeError:
        pytest.skip("NumPy has no loop for this dtype")
    run_both(f, arrays(rng, dtype, (5,)))
