"""The CUDA C++ prelude: OpenCL C's builtins, types and idioms spelled in CUDA C++.

The CUDA target (targets/cuda/target.py) shares the OpenCL target's op tables: both languages
are C with the same arithmetic, and the templates name OpenCL C builtins (``as_uint``,
``convert_int_sat_rtz``, ``select``, ``mul_hi``, ``vload_half``...). Each is defined here once,
with inline PTX where CUDA C++ has no exact word, so the module needs no toolkit header and
every helper compiles under NVRTC for any architecture. Functions carry no execution-space
annotation: modules are compiled with ``-default-device`` (runtime/cuda/build.py).

What each builtin promises is OpenCL's: ``as_T`` reinterprets bits, ``convert_T_sat_rtz``
truncates and saturates (NaN -> 0: PTX ``cvt.rzi`` on floats does exactly that), ``vload_half``
and ``vstore_half_rte`` convert float16 exactly and round to nearest even (PTX ``cvt``).
"""

from __future__ import annotations

PRELUDE = r"""
typedef unsigned char uchar;
typedef signed char schar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef unsigned short half;  /* float16 is stored as its bits; arithmetic is in float */
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif
#ifndef INT_MIN
#define INT_MIN (-2147483647 - 1)
#endif
#define CLK_LOCAL_MEM_FENCE 1
#define CLK_GLOBAL_MEM_FENCE 2
#define __global
template <class T, class F> __forceinline__ T fj_bits(F x) {
    static_assert(sizeof(T) == sizeof(F), "as_T: the sizes differ");
    union { F f; T t; } u;  /* (type punning through a union: defined in CUDA C++) */
    u.f = x;
    return u.t;
}
#define FJ_AS(T) template <class F> __forceinline__ T as_##T(F x) { return fj_bits<T>(x); }
FJ_AS(uchar) FJ_AS(schar) FJ_AS(char) FJ_AS(ushort) FJ_AS(short) FJ_AS(uint) FJ_AS(int)
FJ_AS(ulong) FJ_AS(long) FJ_AS(float) FJ_AS(double)
#undef FJ_AS
template <class T, class C> __forceinline__ T select(T a, T b, C c) { return c ? b : a; }
template <class T> __forceinline__ T clamp(T x, T lo, T hi) {
    return x < lo ? lo : (x > hi ? hi : x);
}
__forceinline__ uint mul_hi(uint a, uint b) { return __umulhi(a, b); }
__forceinline__ int mul_hi(int a, int b) { return __mulhi(a, b); }
__forceinline__ ulong mul_hi(ulong a, ulong b) { return __umul64hi(a, b); }
__forceinline__ long mul_hi(long a, long b) { return __mul64hi(a, b); }
/* float -> integer: truncating, saturating, NaN -> 0 (PTX cvt.rzi) */
__forceinline__ int convert_int_sat_rtz(float x) {
    int r; asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(x)); return r; }
__forceinline__ int convert_int_sat_rtz(double x) {
    int r; asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(r) : "d"(x)); return r; }
__forceinline__ long convert_long_sat_rtz(float x) {
    long r; asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(x)); return r; }
__forceinline__ long convert_long_sat_rtz(double x) {
    long r; asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(r) : "d"(x)); return r; }
__forceinline__ ulong convert_ulong_sat_rtz(float x) {
    ulong r; asm("cvt.rzi.u64.f32 %0, %1;" : "=l"(r) : "f"(x)); return r; }
__forceinline__ ulong convert_ulong_sat_rtz(double x) {
    ulong r; asm("cvt.rzi.u64.f64 %0, %1;" : "=l"(r) : "d"(x)); return r; }
/* float16 <-> float, exact and round-to-nearest-even (PTX cvt) */
__forceinline__ float fj_h2f(ushort h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__forceinline__ ushort fj_f2h(float f) { ushort h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__forceinline__ ushort fj_d2h(double d) { ushort h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__forceinline__ float vload_half(size_t i, const half *p) { return fj_h2f(p[i]); }
__forceinline__ void vstore_half_rte(float x, size_t i, half *p) { p[i] = fj_f2h(x); }
__forceinline__ void vstore_half_rte(double x, size_t i, half *p) { p[i] = fj_d2h(x); }
/* work-item functions: OpenCL's NDRange on CUDA's grid (get_global_size is the kernel's own
   fj_gs0..2 parameters: a grid may be rounded up past the NDRange it runs) */
__forceinline__ size_t get_local_id(int d) {
    return d == 0 ? threadIdx.x : (d == 1 ? threadIdx.y : threadIdx.z); }
__forceinline__ size_t get_group_id(int d) {
    return d == 0 ? blockIdx.x : (d == 1 ? blockIdx.y : blockIdx.z); }
__forceinline__ size_t get_local_size(int d) {
    return d == 0 ? blockDim.x : (d == 1 ? blockDim.y : blockDim.z); }
__forceinline__ size_t get_num_groups(int d) {
    return d == 0 ? gridDim.x : (d == 1 ? gridDim.y : gridDim.z); }
__forceinline__ size_t get_global_id(int d) {
    return get_group_id(d) * get_local_size(d) + get_local_id(d); }
#define get_global_size(d) ((size_t)((d) == 0 ? fj_gs0 : ((d) == 1 ? fj_gs1 : fj_gs2)))
__forceinline__ void barrier(int) { __syncthreads(); }
/* the .shared window address of a generic pointer into shared memory */
__forceinline__ uint fj_saddr(const void *p) { return (uint)__cvta_generic_to_shared(p); }
/* vstoreN/vloadN: N elements at p + N * i, which OpenCL aligns to the element only, so lane by
   lane (CUDA's float4, uint4... hold their lanes in order) */
#define FJ_VSTORE(N) \
template <class V, class T> __forceinline__ void vstore##N(V v, size_t i, T *p) { \
    _Pragma("unroll") for (int k = 0; k < N; k++) p[N * i + k] = ((const T *)&v)[k]; }
FJ_VSTORE(2) FJ_VSTORE(3) FJ_VSTORE(4)
#undef FJ_VSTORE
/* n-lane vectors (reductions and scans keep lanes of neighbouring elements): lanes are
   computed one by one; an aligned vector moves as one access where the width allows */
template <class T, int N> struct __align__(sizeof(T) * N) fj_v { T s[N]; };
template <class T, int N> __forceinline__ fj_v<T, N> fj_splat(T x) {
    fj_v<T, N> r;
#pragma unroll
    for (int k = 0; k < N; k++) r.s[k] = x;
    return r;
}
template <int N> __forceinline__ fj_v<float, N> fj_ldh(const half *p, size_t i) {
    fj_v<ushort, N> h = ((const fj_v<ushort, N> *)p)[i];
    fj_v<float, N> r;
#pragma unroll
    for (int k = 0; k < N; k++) r.s[k] = fj_h2f(h.s[k]);
    return r;
}
template <int N> __forceinline__ void fj_sth(fj_v<float, N> v, half *p, size_t i) {
    fj_v<ushort, N> h;
#pragma unroll
    for (int k = 0; k < N; k++) h.s[k] = fj_f2h(v.s[k]);
    ((fj_v<ushort, N> *)p)[i] = h;
}
template <int N> __forceinline__ fj_v<float, N> fj_rhv(fj_v<float, N> v) {
#pragma unroll
    for (int k = 0; k < N; k++) v.s[k] = fj_h2f(fj_f2h(v.s[k]));
    return v;
}
template <int N> __forceinline__ fj_v<uchar, N> fj_ldb(const uchar *p, size_t i) {
    fj_v<uchar, N> b = ((const fj_v<uchar, N> *)p)[i];
#pragma unroll
    for (int k = 0; k < N; k++) b.s[k] = b.s[k] != 0;
    return b;
}
"""

# complex values: two reals with the vector operators OpenCL's float2/double2 have (+, -, unary
# -, and * and / by a real); made as ``fj_c64(re, im)`` (the OpenCL spelling ``(float2)(re, im)`` is rewritten: in C++
# it would be a comma expression)
COMPLEX = r"""
#define FJ_COMPLEX(C, R) \
struct C { R x, y; \
    __forceinline__ C() {} \
    __forceinline__ C(R re, R im) : x(re), y(im) {} }; \
__forceinline__ C operator+(C a, C b) { return C(a.x + b.x, a.y + b.y); } \
__forceinline__ C operator-(C a, C b) { return C(a.x - b.x, a.y - b.y); } \
__forceinline__ C operator-(C a) { return C(-a.x, -a.y); } \
__forceinline__ C operator*(C a, R s) { return C(a.x * s, a.y * s); } \
__forceinline__ C operator*(R s, C a) { return C(s * a.x, s * a.y); } \
__forceinline__ C operator/(C a, R s) { return C(a.x / s, a.y / s); }
FJ_COMPLEX(fj_c64, float)
FJ_COMPLEX(fj_c128, double)
#undef FJ_COMPLEX
__forceinline__ fj_c64 convert_fj_c64(fj_c128 a) { return fj_c64((float)a.x, (float)a.y); }
__forceinline__ fj_c64 convert_fj_c64(fj_c64 a) { return a; }
__forceinline__ fj_c128 convert_fj_c128(fj_c64 a) { return fj_c128(a.x, a.y); }
__forceinline__ fj_c128 convert_fj_c128(fj_c128 a) { return a; }
"""
