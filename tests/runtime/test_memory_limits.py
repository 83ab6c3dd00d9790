"""Too-big requests fail early (issue 9, class 10): broadcast NumPy inputs are uploaded
un-broadcast and read with stride 0; every buffer is checked against the device's largest
allocation and its global memory before anything is allocated or launched."""

from __future__ import annotations

import numpy as np
import pyopencl.array as cla
import pytest

from fusejit import DeviceMemoryError, fuse
from fusejit.runtime.opencl import hostmem
from fusejit.testing import assert_matches


def _where(x, y):
    return np.where(x > 0, x, y)


CASES = [  # (function, small shape, broadcast shape, dtype)
    (lambda x, y: x + 1, (3, 1), (3, 1000), np.float32),
    (lambda x, y: x * y, (), (5, 7), np.int32),
    (lambda x, y: x.sum(0), (1, 8), (600, 8), np.int64),
    (lambda x, y: (x - y).max(1), (4, 1, 5), (4, 9, 5), np.float64),
    (_where, (1, 6), (6, 6), np.int8),
    (lambda x, y: x.astype(np.float32) / 3, (2, 1), (2, 4099), np.uint16),
    (lambda x, y: x | (y > 0), (1,), (33,), np.bool_),
]


@pytest.mark.parametrize("fn,small,shape,dtype", CASES)
def test_broadcast_inputs_are_uploaded_unbroadcast(fn, small, shape, dtype, rng, monkeypatch,
                                                   has_fp64):
    if np.dtype(dtype) == np.float64 and not has_fp64:
        pytest.skip("no fp64 on this device")
    base = (rng.standard_normal(small) * 10).astype(dtype)
    x = np.broadcast_to(base, shape)
    y = (rng.standard_normal(shape) * 10).astype(dtype)
    uploaded = []  # NumPy inputs, as uploaded or as wrapped on a host-memory device
    real, real_wrap = cla.to_device, hostmem.wrap

    def to_device(queue, host, *args, **kwargs):
        uploaded.append(host.nbytes)
        return real(queue, host, *args, **kwargs)

    def wrap(context, host, writable):
        uploaded.append(host.nbytes)
        return real_wrap(context, host, writable)
    monkeypatch.setattr(cla, "to_device", to_device)
    monkeypatch.setattr(hostmem, "wrap", wrap)
    f = fuse(fn)
    assert_matches(f(x, y), fn(x, y))
    assert uploaded[0] == base.nbytes  # the small array, not its broadcast
    assert 0 in f.lower(x, y).graph.params[0].strides
    # a read-only array of the same shape that is not a broadcast: its own specialisation
    z = (rng.standard_normal(shape) * 10).astype(dtype)
    z.flags.writeable = False
    assert_matches(f(z, y), fn(z, y))


def _limits(queue):
    d = queue.device
    return int(d.max_mem_alloc_size), int(d.global_mem_size)


def test_an_output_larger_than_one_allocation_fails_before_launching(queue, launches):
    max_alloc, _ = _limits(queue)
    n = max_alloc // 4 + 8
    x = np.broadcast_to(np.float32(1), (n,))  # no memory behind it
    with pytest.raises(DeviceMemoryError, match=r"output 0 \(float32\[\d+\]\).*"
                       "CL_DEVICE_MAX_MEM_ALLOC_SIZE") as info:
        fuse(lambda x: x + 1)(x)
    assert isinstance(info.value, MemoryError)
    assert not launches


def test_buffers_that_together_exceed_global_memory_fail(queue, launches):
    max_alloc, global_mem = _limits(queue)
    k = global_mem // max_alloc + 1
    x = np.broadcast_to(np.int8(1), (max_alloc,))

    def f(x):
        return tuple(x + i for i in range(k))
    with pytest.raises(DeviceMemoryError, match="CL_DEVICE_GLOBAL_MEM_SIZE"):
        fuse(f)(x)
    assert not launches


def test_a_broadcast_of_more_than_two_billion_elements_reduces_without_expanding(queue):
    n = 2**31 + 8
    x = np.broadcast_to(np.arange(3, dtype=np.int8)[:, None], (3, n // 3 + 1))
    low = fuse(lambda x: x.max()).lower(x)
    assert low.module.wide and 0 in low.graph.params[0].strides
