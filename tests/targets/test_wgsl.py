"""The GLSL -> WGSL translation of Vulkan kernels with barriers (fusejit/targets/wgsl/translate.py).

naga's GLSL ``barrier()`` synchronises a subgroup only, so kernels with barriers compile as
WGSL, whose ``workgroupBarrier()`` spans the work-group. Checked here: the translation of each
construct fusejit's GLSL uses (no device), the translated op catalog against the GLSL one bit
for bit, and reductions and rows whose work-groups span many subgroups.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import use_device, vulkan_mode

from fusejit import fuse
from fusejit.targets.wgsl.translate import WGSLError, translate

_HEAD = ("#version 450\nHELPERS\nlayout(local_size_x = 64, local_size_y = 1, local_size_z = 1)"
         " in;\nlayout(std430, set = 0, binding = 0) restrict buffer B_out0 { float out0[]; };\n"
         "layout(std140, set = 0, binding = 1) uniform FjArgs { uint fj_g0; uint fj_groups; "
         "float fj_zero; float fj_one; uint fj_s0_word; };\n#define fj_s0 (fj_s0_word != 0u)\n"
         "void main()\n{\nBODY\n}\n")


def wgsl(body: str, helpers: str = "") -> str:
    return translate(_HEAD.replace("HELPERS", helpers).replace("BODY", body))


def main_of(text: str) -> str:
    return text[text.index("fn main("):]


def test_interface_becomes_bindings_and_private_copies() -> None:
    out = wgsl("out0[0] = fj_one;")
    assert "@group(0) @binding(0) var<storage, read_write> out0: array<f32>;" in out
    assert "struct FjArgs { fj_g0: u32, fj_groups: u32, fj_zero: f32, fj_one: f32, " \
           "fj_s0_word: u32, }" in out
    assert "@group(0) @binding(1) var<uniform> fj_args: FjArgs;" in out
    assert "var<private> fj_one: f32;" in out and "    fj_one = fj_args.fj_one;" in out
    assert "@compute @workgroup_size(64, 1, 1)" in out


def test_ternaries_become_selects_and_binary_ops_are_parenthesised() -> None:
    out = main_of(wgsl("float a = fj_one; out0[0] = a > 0.0 || a < 1.0 && a != 2.0 ? a : -a;"))
    assert "out0[0] = select((-a), a, ((a > 0.0) || ((a < 1.0) && (a != 2.0))));" in out


def test_shift_amounts_are_unsigned_and_macros_expand() -> None:
    out = main_of(wgsl("int i = 3; uint u = 1u << i; u <<= i; int j = i >> 2; "
                       "out0[0] = fj_s0 ? 1.0 : 0.0;"))
    assert "var u: u32 = (1u << u32(i));" in out and "u <<= u32(i);" in out
    assert "var j: i32 = (i >> 2);" in out
    assert "select(0.0, 1.0, (fj_s0_word != 0u))" in out


def test_declarations_constants_and_arrays() -> None:
    out = main_of(wgsl("const int k = 3; const int r = k * 2; float c[4]; double x = double(k),"
                       " y; c[k] = float(r); out0[0] = c[k];"))
    assert "const k: i32 = 3;" in out and "let r: i32 = (k * 2);" in out
    assert "var c: array<f32, 4>;" in out
    assert "var x: f64 = f64(k);" in out and "var y: f64;" in out


def test_control_flow_gets_braces_and_loops() -> None:
    out = main_of(wgsl("""
    int n = 0;
    if (n > 1) n = 2; else if (n < 0) n = 3; else n = 4;
    for (int i = 0, j = 5; i < j; i++, j--) n += i;
    for (; n > 0; n--) { if (n == 7) break; }
    do { n++; if (n > 9) break; } while (false);
    do { n++; } while (n < 20);
    while (n > 30) n -= 1;
    """))
    assert "if ((n > 1)) {\n        n = 2;\n    } else if ((n < 0)) {\n        n = 3;\n    } " \
           "else {\n        n = 4;\n    }" in out
    assert re.search(r"var i: i32 = 0;\n\s+var j: i32 = 5;\n\s+loop \{\n\s+if !\(\(i < j\)\) "
                     r"\{ break; \}\n\s+n \+= i;\n\s+continuing \{ i\+\+; j--; \}", out)
    assert "for (; (n > 0); n--) {" in out
    assert re.search(r"loop \{\n\s+n\+\+;\n\s+if \(\(n > 9\)\) \{\n\s+break;\n\s+\}\n\s+break;",
                     out)
    assert "continuing { break if !((n < 20)); }" in out
    assert "while ((n > 30)) {\n        n -= 1;\n    }" in out


def test_functions_copy_assigned_parameters_and_point_at_out_ones() -> None:
    helpers = """
float fj_half(float a, float b) { a *= 0.5; return a + b; }
float fj_split(float a, out float rest) { rest = a - floor(a); return floor(a); }
"""
    out = wgsl("float r; float f = fj_split(fj_half(fj_one, 1.0), r); out0[0] = f + r;", helpers)
    assert "fn fj_half(fj_in_a: f32, b: f32) -> f32 {\n    var a: f32 = fj_in_a;" in out
    assert "fn fj_split(a: f32, rest: ptr<function, f32>) -> f32 {" in out
    assert "(*rest) = (a - floor(a));" in out
    assert "fj_split(fj_half(fj_one, 1.0), &r)" in out


def test_builtins_wgsl_spells_otherwise() -> None:
    out = wgsl("float a = fj_one; double d = double(a); bool n = isnan(a) || isnan(d);"
               " out0[0] = uintBitsToFloat(floatBitsToUint(a) & 0x7fffffffu) + roundEven(a)"
               " + atan(a, 2.0) + mod(a, 2.0) + inversesqrt(a); barrier();")
    assert "bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu))" in out
    assert "round(a)" in out and "atan2(a, 2.0)" in out and "inverseSqrt(a)" in out
    assert "fj_wgsl_mod(a, 2.0)" in out and "fn fj_wgsl_mod(" in out
    assert "(fj_wgsl_isnan(a) || fj_wgsl_isnan_d(d))" in out
    assert "workgroupBarrier();" in out and "barrier()" not in out.replace("workgroupB", "")


def test_literal_nan_and_infinity_bits_are_not_constant() -> None:
    """WGSL rejects a constant expression that yields NaN or infinity; finite ones stay
    literal."""
    out = main_of(wgsl("out0[0] = uintBitsToFloat(0x7fc00000u) + uintBitsToFloat(0xff800000u)"
                       " + uintBitsToFloat(0x3f800000u) + intBitsToFloat(-8388608);"))
    assert "bitcast<f32>((0x7fc00000u | fj_u0))" in out
    assert "bitcast<f32>((0xff800000u | fj_u0))" in out
    assert "bitcast<f32>(0x3f800000u)" in out
    assert "bitcast<f32>(((-8388608) | i32(fj_u0)))" in out


def test_reserved_words_are_renamed() -> None:
    out = main_of(wgsl("float mod = fj_one; float target = mod * 2.0; out0[0] = target;"))
    assert "var mod_: f32 = fj_one;" in out and "var target_: f32 = (mod_ * 2.0);" in out


@pytest.mark.parametrize("glsl", ["float x = fj_one; out0[0] = fj_missing(x);",
                                  "out0[0] = 1.0 @ 2.0;",
                                  "vec9 v; out0[0] = 1.0;"])
def test_what_it_does_not_know_is_a_named_error(glsl) -> None:
    with pytest.raises(WGSLError):
        wgsl(glsl)


def test_conversions_of_64_bit_constants_are_not_folded() -> None:
    """naga cannot convert a 64-bit constant to a narrower or float type while compiling (a
    gather index clamped from a literal): those go through the zero it does not know; a
    variable's conversion stays plain."""
    out = main_of(wgsl("int64_t v = int64_t(fj_g0); int a = int(2l); int b = int(v); "
                       "float c = float(1l < 0l ? 0l : 3l); uint64_t d = uint64_t(5l); "
                       "out0[0] = float(a + b) + c + float(d);"))
    assert "var a: i32 = i32((2li | i64(fj_u0)));" in out
    assert "var b: i32 = i32(v);" in out
    assert "f32((select(3li, 0li, (1li < 0li)) | i64(fj_u0)))" in out
    assert "var d: u64 = u64(5li);" in out


@pytest.mark.parametrize("index", ["int8", "uint8", "int32", "uint32", "int64", "uint64"])
def test_index_clamps_spell_conversions_as_constructors(index) -> None:
    """Target's shared index code converts through ``cast`` (a C cast is neither GLSL nor
    WGSL, and the translation names one if it ever meets it)."""
    from fusejit.targets.glsl.target import GLSLTarget

    target = GLSLTarget(frozenset({"shader-int64", "fj-wgsl-int64"}))
    text = target.clamp_index("v", np.dtype(index), 9, "int")
    assert not re.search(r"\((int|uint|int64_t|uint64_t)\)", text), text
    ctype = target.compute_type(np.dtype(index))
    out = main_of(wgsl(f"{ctype} v = {ctype}(fj_g0); int g = {text}; out0[g] = 1.0;"))
    assert "var g: i32 = i32(" in out
    with pytest.raises(WGSLError, match="C cast"):
        wgsl("int64_t v = int64_t(fj_g0); int g = (int)(v); out0[g] = 1.0;")


# -- on a Vulkan device --------------------------------------------------------------------------


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("shape", [(37, 1000), (5, 4096), (9, 40), (3, 1), (1, 100003)])
def test_rows_and_reductions_span_work_groups_of_many_subgroups(rng, shape) -> None:
    """By default the kernels with barriers are WGSL and their work-groups span many subgroups:
    every lane's part of each row (from lane 32 and subgroup 2 on too) reaches its result."""
    use_device("vulkan")
    import fusejit.vulkan as fv
    from fusejit.runtime.vulkan.pipelines import wgsl_needed

    x = rng.standard_normal(shape).astype(np.float32)
    x[:, -1] = 50.0
    x[-1, 33 % shape[1]] = 60.0
    x[0, (shape[1] * 3) // 4] = 70.0
    d = fv.to_device(x)
    f = fuse(lambda a: (a.max(axis=1), a.sum(axis=1), (a > 49).any(axis=1), _softmax(a),
                        a.min()))
    got = f(d)
    np.testing.assert_array_equal(got[0].get(), x.max(axis=1))
    np.testing.assert_allclose(got[1].get(), x.sum(axis=1), rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(got[2].get(), (x > 49).any(axis=1))
    np.testing.assert_allclose(got[3].get(), _softmax(x), rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(got[4].get(), x.min())
    dev = fv.default_device()
    kernels = f.lower(d).module.kernels
    barriers = [k for k in kernels if "barrier();" in k.source]
    assert barriers and all(wgsl_needed(dev, k.source) for k in barriers)
    if shape[1] >= 1000:
        assert max(math.prod(k.local_size) for k in barriers) > 32


def _catalog():
    import test_ops_catalog as cat

    return cat


@pytest.fixture(scope="module")
def wgsl_everywhere():
    """One Vulkan device opened with FUSEJIT_VULKAN_WGSL=all, shared by the catalog's pieces
    below (opening a device per piece costs more than some pieces)."""
    use_device("vulkan")
    with pytest.MonkeyPatch.context() as mp:
        return vulkan_mode(mp, "all")


def _catalog_pieces() -> list:
    """The catalog split into pieces xdist can spread over workers (the whole catalog in one
    test was the suite's longest test): each layout's unary and binary ops per dtype, and its
    casts."""
    dtypes = _catalog().DTYPES
    return [pytest.param(layout, kind, dtype, id=f"{layout}-{kind}" + (f"-{dtype}" if dtype else ""))
            for layout in ("scalar", "vector")
            for kind, group in (("unary", dtypes), ("binary", dtypes), ("cast", (None,)))
            for dtype in group]


@pytest.mark.parametrize(("layout", "kind", "dtype"), _catalog_pieces())
def test_op_catalog_translated_matches_glsl_bit_for_bit(monkeypatch, wgsl_everywhere, layout,
                                                        kind, dtype) -> None:
    """Every op, cast and dtype of the catalog compiled as WGSL (FUSEJIT_VULKAN_WGSL=all) gives
    the bits the GLSL kernels give (the catalog checks those against NumPy)."""
    import fusejit
    from fusejit.runtime.vulkan import device as vk_device

    cat = _catalog()
    use_device("vulkan")
    if dtype is not None and dtype not in cat.vulkan_dtypes():
        pytest.skip(f"this Vulkan adapter has no {dtype} (the catalog checks it is refused)")
    previous = fusejit.get_default_device()
    fusejit.set_default_device("vulkan")
    try:
        # the GLSL side is the catalog's own (cached) run where this worker made it already
        results = cat.cast_results if kind == "cast" else getattr(cat, f"{kind}_results")
        args = (layout, "vulkan") if kind == "cast" else (dtype, layout, "vulkan")
        want = results(*args)
        monkeypatch.setattr(vk_device, "_default", wgsl_everywhere)
        got = results.__wrapped__(*args)
        assert got.keys() == want.keys(), kind
        for case, value in want.items():
            if isinstance(value, Exception):
                assert type(got[case]) is type(value), case
                continue
            a, b = np.asarray(got[case]), np.asarray(value)
            assert a.dtype == b.dtype and a.shape == b.shape, case
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8),
                                          err_msg=f"{kind} {dtype} {case}")
    finally:
        fusejit.set_default_device(previous)
