"""Every named error: its class (also the builtin a NumPy user would catch), a message that
teaches, and no side effects: a failing call launches nothing, modifies no input, caches
nothing, and the next good call works.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
import pytest

import fusejit
import fusejit.errors
import fusejit.runtime.executable
from fusejit import fuse
from fusejit.runtime.opencl.build import build_options, build_program
from fusejit.runtime.opencl.devices import device_info
from fusejit.testing import assert_matches

BUILTIN_OF = {
    fusejit.TracerConversionError: (TypeError,),
    fusejit.TracerBoolConversionError: (TypeError, ValueError),  # NumPy's truth-value error
    fusejit.UnsupportedOperationError: (NotImplementedError,),
    fusejit.UnsupportedAttributeError: (NotImplementedError, AttributeError),
    fusejit.BroadcastError: (ValueError,),
    fusejit.ContextMismatchError: (ValueError,),
    fusejit.UnsupportedDTypeError: (TypeError,),
    fusejit.ReadOnlyError: (ValueError,),
    fusejit.KernelBuildError: (RuntimeError,),
    fusejit.ValidationError: (AssertionError,),
    fusejit.RandomStateError: (TypeError,),
    fusejit.InternalError: (RuntimeError,),
    fusejit.ScheduleError: (RuntimeError,),
    fusejit.DeviceMemoryError: (MemoryError,),
    fusejit.DeviceIndexError: (IndexError,),
    fusejit.CapturedStateError: (TypeError,),
    fusejit.MatmulPrecisionError: (ValueError,),
    fusejit.IntRangeError: (NotImplementedError, OverflowError),
}


def test_every_error_class_subclasses_its_builtin_and_is_exported():
    assert set(BUILTIN_OF) | {fusejit.FusejitError} == {
        getattr(fusejit.errors, name) for name in fusejit.errors.__all__}
    for cls, builtins in BUILTIN_OF.items():
        assert issubclass(cls, fusejit.FusejitError)
        assert issubclass(cls, builtins), cls
        assert getattr(fusejit, cls.__name__) is cls




# -- each mistake, in a function that also has a good path -----------------------------------------


def _python_if(x, y):
    x[...] = x + 1  # a write traced before the mistake must not reach the input
    if x > 0:
        return x
    return y


MISTAKES = {
    # name: (body of the fused function, expected class, fragments of the message)
    "python_if": (_python_if, fusejit.TracerConversionError,
                  ["bool[1024]", "np.where", "Python bool"]),
    "bool_call": (lambda x, y: bool(x), fusejit.TracerConversionError,
                  ["float32[1024]", "np.where"]),
    "float_call": (lambda x, y: float(x.sum()), fusejit.TracerConversionError,
                   ["float32[]", "Python float", "static"]),
    "int_call": (lambda x, y: y[int(x[0])], fusejit.TracerConversionError,
                 ["float32[]", "Python int", "x.shape"]),
    "range_of_traced": (lambda x, y: [x for _ in range(y[0])], fusejit.TracerConversionError,
                        ["int64[]", "Python int"]),
    "np_sort": (lambda x, y: np.sort(x), fusejit.UnsupportedOperationError, ["np.sort"]),
    "np_linalg_inv": (lambda x, y: np.linalg.inv(x.reshape(32, 32)),
                      fusejit.UnsupportedOperationError, ["np.linalg.inv"]),
    "divide_accumulate": (lambda x, y: np.divide.accumulate(x),
                          fusejit.UnsupportedOperationError,
                          ["np.divide.accumulate", "associative"]),
    "sort_method": (lambda x, y: x.sort(), fusejit.UnsupportedAttributeError, ["ndarray.sort"]),
    "mask_gather": (lambda x, y: x[x > 0], fusejit.UnsupportedOperationError,
                    ["data-dependent shape", "np.where"]),
    "shapes": (lambda x, y: x + y, fusejit.BroadcastError,
               ["operands could not be broadcast together with shapes (1024,) (7,)"]),
    "clongdouble_astype": (lambda x, y: x.astype(np.clongdouble), fusejit.UnsupportedDTypeError,
                           ["complex256", "supported dtypes are"]),
    "longdouble_constant": (lambda x, y: x + np.ones(1024, np.longdouble),
                            fusejit.UnsupportedDTypeError, ["float128"]),
    "complex_matmul": (lambda x, y: (x * 1j).reshape(32, 32) @ x.reshape(32, 32),
                       fusejit.UnsupportedDTypeError,
                       ["np.matmul", "complex64", "outside the fused function"]),
    "write_broadcast_view": (lambda x, y: np.broadcast_to(x, (2, 1024)).__setitem__(0, 1.0),
                             fusejit.ReadOnlyError, ["read-only"]),
}


def _fused_with_mistake():
    @fuse(static_argnames="mistake")
    def f(x, y, mistake=None):
        if mistake is not None:
            return MISTAKES[mistake][0](x, y)
        x[...] = x * 2
        return x + 1
    return f


@pytest.mark.parametrize("on_device", [False, True], ids=["numpy", "device"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_mistake_raises_teaching_error_without_side_effects(mistake, on_device, queue,
                                                            launches):
    _, cls, fragments = MISTAKES[mistake]
    x_host = np.linspace(-1, 1, 1024, dtype=np.float32)
    y_host = np.arange(7, dtype=np.int64)
    x = cla.to_device(queue, x_host) if on_device else x_host.copy()
    y = cla.to_device(queue, y_host) if on_device else y_host.copy()
    f = _fused_with_mistake()
    with pytest.raises(cls) as error:
        f(x, y, mistake=mistake)
    for fragment in fragments:
        assert fragment in str(error.value)
    assert not launches
    assert f.cache_info().currsize == 0
    assert_matches(x.get() if on_device else x, x_host, what="input after the error")
    assert_matches(y.get() if on_device else y, y_host, what="input after the error")
    # the same function still works
    assert_matches(f(x, y), x_host * 2 + 1)
    assert_matches(x.get() if on_device else x, x_host * 2)
    assert f.cache_info().currsize == 1 and launches


def test_tracer_conversion_message_names_the_value_once():
    with pytest.raises(fusejit.TracerConversionError) as error:
        fuse(lambda x: bool(x))(np.ones(1024, np.float32))
    message = str(error.value)
    assert message.startswith("cannot convert float32[1024] traced value to a Python bool")
    assert "traced value traced value" not in message


def test_unsupported_method_is_still_an_attribute_error():
    """hasattr() and getattr(x, name, default) keep working on traced values."""
    seen = []

    @fuse
    def f(x):
        seen.append((hasattr(x, "sort"), getattr(x, "tofile", None), hasattr(x, "no_such")))
        return x + 1

    f(np.ones(3, np.float32))
    assert seen == [(False, None, False)]


# -- mistakes in the arguments ---------------------------------------------------------------------


def test_arrays_from_two_contexts(queue, launches):
    other = cl.CommandQueue(cl.Context(devices=[queue.device]))
    x_host = np.arange(8, dtype=np.float32)
    a, b = cla.to_device(queue, x_host), cla.to_device(other, x_host)
    f = fuse(lambda a, b: a + b)
    with pytest.raises(fusejit.ContextMismatchError, match="different OpenCL context"):
        f(a, b)
    with pytest.raises(ValueError):
        f(b, a)
    assert not launches and f.cache_info().currsize == 0
    assert_matches(a.get(), x_host) and assert_matches(b.get(), x_host)
    assert_matches(f(a, a), x_host * 2)  # one context works
    assert_matches(f(b, b), x_host * 2)  # so does the other, on its own queue


@pytest.mark.parametrize("value", [
    np.ones(3, np.clongdouble), np.array([1, "a"], dtype=object),
    np.zeros(3, dtype=[("a", "f4"), ("b", "i4")]), np.array(["a", "bc"]), np.array([b"a"]),
    np.array(["2020-01-01"], dtype="datetime64[D]"), np.clongdouble(1),
], ids=["clongdouble", "object", "structured", "unicode", "bytes", "datetime",
        "numpy_clongdouble"])
def test_unsupported_dtype_arguments(value, launches):
    f = fuse(lambda x, y: y * 2)
    good = np.arange(3, dtype=np.float32)
    with pytest.raises(fusejit.UnsupportedDTypeError) as error:
        f(value, good)
    assert "complex" in str(error.value) or "supported dtypes are" in str(error.value)
    assert not launches and f.cache_info().currsize == 0
    assert_matches(f(good, good), good * 2)


def test_unsupported_dtype_device_array(queue):
    x = cla.to_device(queue, np.ones(4, np.longdouble))
    with pytest.raises(fusejit.UnsupportedDTypeError, match="float128"):
        fuse(lambda x: x + 1)(x)


def test_read_only_numpy_input_cannot_be_written():
    x = np.ones(4, np.float32)
    x.flags.writeable = False
    f = fuse(lambda x: np.add(x, 1, out=x))
    with pytest.raises(fusejit.ReadOnlyError, match="read-only"):
        f(x)
    assert_matches(x, np.ones(4, np.float32))
    assert f.cache_info().currsize == 0


def test_out_of_range_scalar_argument_fails_before_any_launch(queue, launches):
    """OverflowError is NumPy's (not a fusejit class), raised when the call converts its
    arguments: the kernel is compiled, but nothing runs and the input keeps its value."""
    @fuse
    def f(x, s):
        x[...] = x + 1
        return x.sum() + (x + s)

    host = np.arange(10, dtype=np.int8)
    x = cla.to_device(queue, host)
    with pytest.raises(OverflowError, match="300"):
        f(x, 300)
    assert not launches
    assert_matches(x.get(), host)
    assert_matches(f(x, 3), (host + 1).sum() + (host + 1 + 3).astype(np.int64))


# -- a compiler failure ----------------------------------------------------------------------------


def test_kernel_build_error_shows_numbered_source_and_log(queue):
    source = "__kernel void broken(__global float *x)\n{\n    x[0] = undeclared_y;\n}\n"
    with pytest.raises(fusejit.KernelBuildError) as error:
        build_program(queue.context, source, build_options(device_info(queue.device)), "broken")
    message = str(error.value)
    assert "OpenCL build of broken failed" in message
    assert "   3 |     x[0] = undeclared_y;" in message  # numbered source
    assert "--- compiler log ---" in message and "undeclared_y" in error.value.log
    assert error.value.log.strip() in message and error.value.source == source


# -- a device whose compiler cannot build at all ---------------------------------------------------


class _FakeDevice:
    """What ``devices.usable`` reads of a device: its type, name and platform version."""

    def __init__(self, name: str, kind: int = cl.device_type.CPU) -> None:
        self.name, self.type = name, kind
        self.platform = type("P", (), {"version": "OpenCL 3.0 fake"})()


def test_device_choice_skips_a_cpu_device_that_cannot_build(monkeypatch, caplog):
    """Two PoCL platforms (the wheel's, whose LLVM does not know a newer processor, and the
    system's): the default is the first that builds a kernel, the other logged; a GPU and a
    lone device are never probed."""
    from fusejit.runtime.opencl import devices

    broken, good, gpu = _FakeDevice("old"), _FakeDevice("new"), _FakeDevice(
        "gpu", cl.device_type.GPU)
    probed = []

    def failure(d):
        probed.append(d.name)
        return "error: unknown target CPU 'generic'" if d is broken else None

    monkeypatch.setattr(devices, "build_failure", failure)
    with caplog.at_level("INFO", logger="fusejit"):
        assert devices.usable([broken, good]) == [good]
    assert "skipping OpenCL device 'old'" in caplog.text and "unknown target CPU" in caplog.text
    assert devices.usable([broken]) == [broken] and probed == ["old", "new"]  # (alone: kept)
    assert devices.usable([gpu, good]) == [gpu, good] and probed[-1] == "new"
    with pytest.raises(fusejit.DeviceUnavailableError, match="apt install pocl-opencl-icd"):
        devices.usable([broken, broken])


def test_a_compiler_that_knows_no_target_is_the_devices_error_not_a_fusejit_bug(queue):
    """PoCL answers every build with "unknown target CPU 'generic'" on a processor its LLVM
    predates: that is the setup's error (DeviceUnavailableError, saying what to install), not
    a KernelBuildError asking for a bug report."""
    from fusejit.runtime.opencl import build

    exc = cl.RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n"
                          "error: unknown target CPU 'generic'")
    err = build._build_error(queue.context, "k", "__kernel void k() {}", exc)
    assert isinstance(err, fusejit.DeviceUnavailableError)
    assert "pocl-opencl-icd" in str(err) and "bug" not in str(err)
    other = build._build_error(queue.context, "k", "src", cl.RuntimeError("error: x undeclared"))
    assert isinstance(other, fusejit.KernelBuildError)
