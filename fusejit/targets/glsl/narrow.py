"""8- and 16-bit integers on the Vulkan target, packed in 32-bit words.

naga's GLSL frontend has no 8/16-bit integer types (whatever the adapter's features), so the
arrays live in ``uint`` buffers: element ``i`` of an 8-bit array is byte ``i & 3`` of word
``i >> 2``. Values compute as int/uint and are wrapped to their width after every op and
conversion, as NumPy's loops wrap.

Loads can read any element. A store of one element would have to read, modify and write its
word, racing the work-items that own its neighbours, so only stores of whole words are
spelled: a work-item's vector of 4 neighbouring lanes (contiguous elementwise outputs of at
least 4096 elements whose size is a multiple of the lanes; see source.default_vector_width).
Other stores raise UnsupportedDTypeError before anything runs.
"""

from __future__ import annotations

from fusejit.errors import UnsupportedDTypeError

BITS = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16}


def compute_type(name: str) -> str:
    return "uint" if name.startswith("u") else "int"


def wrap(name: str, x: str) -> str:
    """``x`` (an int or uint expression) wrapped to the dtype's width, as NumPy wraps."""
    bits = BITS[name]
    if name.startswith("u"):
        return f"(uint({x}) & {(1 << bits) - 1:#x}u)"
    return f"((int({x}) << {32 - bits}) >> {32 - bits})"


def _lane(name: str, word: str, shift: str) -> str:
    """The element at bit ``shift`` of ``word``, sign- or zero-extended."""
    bits = BITS[name]
    if name.startswith("u"):
        return f"(({word} >> {shift}) & {(1 << bits) - 1:#x}u)"
    return f"(int({word} << (uint({32 - bits}) - {shift})) >> {32 - bits})"


def load(ptr: str, index: str, name: str) -> str:
    per = 32 // BITS[name]
    shift = f"({BITS[name]}u * (uint({index}) & {per - 1}u))"
    return _lane(name, f"{ptr}[({index}) >> {per.bit_length() - 1}]", shift)


def store_error(name: str) -> UnsupportedDTypeError:
    return UnsupportedDTypeError(
        f"this call writes {name} elements one at a time, which the Vulkan target cannot do: "
        f"naga's GLSL has no {BITS[name]}-bit types, so {name} arrays are packed in 32-bit words "
        "and a kernel may only write whole 32-bit words (contiguous elementwise results of at "
        "least 4096 elements, a multiple of 4); return a wider dtype, or use the OpenCL device")


def vector_load(ptr: str, index: str, name: str, n: int, vtype: str) -> str:
    bits, lanes = BITS[name], []
    if (n * bits) % 32:  # (vectors of part of a word, 2 int8 lanes say: lanes one by one)
        return f"{vtype}({', '.join(load(ptr, f'({index}) * {n} + {i}', name) for i in range(n))})"
    for i in range(n):
        word = f"{ptr}[({index}) * {n * bits // 32} + {i * bits // 32}]"
        lanes.append(_lane(name, word, f"{(i * bits) % 32}u"))
    return f"{vtype}({', '.join(lanes)})"


def vector_store(ptr: str, index: str, name: str, n: int) -> str:
    bits = BITS[name]
    if (n * bits) % 32:
        raise store_error(name)
    mask, words = (1 << bits) - 1, []
    per = 32 // bits
    for w in range(n * bits // 32):
        parts = [f"((uint({{0}}.{'xyzw'[w * per + j]}) & {mask:#x}u) << {j * bits}u)"
                 for j in range(per)]
        words.append(f"{ptr}[({index}) * {n * bits // 32} + {w}] = {' | '.join(parts)};")
    return " ".join(words)
