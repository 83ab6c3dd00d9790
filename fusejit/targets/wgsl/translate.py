"""The GLSL compute shaders of targets/glsl/target.py, translated to WGSL for naga's WGSL frontend.

Why: naga (wgpu's only GLSL compiler) turns GLSL's ``barrier()`` into a control barrier of
*Subgroup* execution scope (front/glsl/builtins.rs maps it to ``Barrier::all()``, which holds
SUB_GROUP, and back/spv writes that scope whenever SUB_GROUP is set), and its GLSL frontend knows
no other barrier. On an H200 that synchronised only each 32-lane subgroup, so with GLSL alone a
reduction or a row (softmax, layernorm) cannot span more than one subgroup. WGSL's
``workgroupBarrier()`` is ``Barrier::WORK_GROUP`` alone: Workgroup execution scope. So the
kernels that hold a barrier are translated to WGSL (runtime/vulkan/pipelines.py), and so are
those with 64-bit integers (naga's GLSL has no ``int64_t``; its WGSL has ``i64`` and ``u64``
with the adapter's shader-int64); nothing else is: these are the things naga's GLSL frontend
cannot express.

The translation takes the GLSL that GLSLTarget and SourceModule write, not GLSL at large, and
raises ``WGSLError`` on anything outside it (a bug of fusejit's, reported as a build error).
What it maps:

* declarations carry their types (``float x = e;`` -> ``var x: f32 = e;``; ``const`` -> ``let``,
  or ``const`` for a literal), arrays, ``shared`` arrays (``var<workgroup>``), the storage
  buffers, and the uniform block (a struct whose members are copied into module-scope private
  variables at the start of ``main``, so helpers see them by the same names);
* functions: parameters are immutable in WGSL, so one the body assigns is copied into a
  ``var``; ``out`` parameters become pointers (``*p`` in the callee, ``&x`` at calls);
* statements: braces around every branch and loop body, ``do { } while (c)`` as ``loop`` with
  a ``continuing { break if }``;
* expressions: every binary operation parenthesised (WGSL forbids mixing ``&&`` with ``||`` or
  shifts with ``+`` unparenthesised), ``c ? a : b`` as ``select(b, a, c)`` (both sides are
  pure: the templates already repeat operands), shift amounts as ``u32``, the builtins WGSL
  spells differently (bit casts, ``roundEven``, two-argument ``atan``, ``mod``, ``isnan`` by
  bit pattern), and object-like ``#define`` macros expanded;
* GLSL's implicit conversions (int to int64_t, int to float, float to double) made explicit
  where operand, assignment, return and argument types differ, 32-bit integers widened to 64
  bits by bit operations (wgsl_expr._WIDEN says why), 64-bit literal suffixes (``l``, ``ul``
  as ``li``, ``lu``);
* a bit cast of a literal goes through a zero that naga cannot fold (``fj_u0``): WGSL makes a
  constant expression that yields NaN or infinity a compile error, and fusejit writes those
  values as ``uintBitsToFloat(0x7fc00000u)``; so does a 64-bit constant converted to another
  type, which naga's constant evaluator cannot convert (a gather index clamped from a literal);
* a C cast (``(int)x``) is no GLSL: it raises ``WGSLError`` naming it (Target.cast spells
  conversions);
* identifiers that WGSL reserves get a trailing underscore.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fusejit.targets.wgsl.expr import (
    ASSIGN,
    BUILTINS,
    HELPERS,
    TYPES,
    Func,
    Parser,
    WGSLError,
    coerce,
    safe,
)


@dataclass
class _Module:
    local_size: tuple[int, int, int] = (1, 1, 1)
    header: list[str] = field(default_factory=list)  # enables, structs, bindings, globals
    functions: list[str] = field(default_factory=list)
    uniforms: list[tuple[str, str]] = field(default_factory=list)  # (name, WGSL type)
    main: list[str] = field(default_factory=list)


def translate(glsl: str) -> str:
    """WGSL for one GLSL compute shader as fusejit writes it (see the module docstring)."""
    return _Translator(glsl).module()


class _Translator(Parser):
    def __init__(self, glsl: str) -> None:
        self.m = _Module()
        self.helpers: set[str] = set()
        self.macros: dict[str, list[str]] = {}
        text = []
        for line in glsl.split("\n"):
            s = line.strip()
            if s.startswith("#define "):
                _, name, body = s.split(None, 2)
                self.macros[name] = self._lex(body)
            elif s.startswith("#extension") and "float16" in s:
                self.m.header.insert(0, "enable f16;")
            elif not s.startswith("#"):
                text.append(line)
        toks = self._lex("\n".join(text))
        self.toks: list[str] = []
        for t in toks:  # (object-like macros, which never refer to one another)
            self.toks.extend(self.macros.get(t, [t]))
        self.i = 0
        self.funcs: dict[str, Func] = {}
        self.scopes: list[dict[str, str]] = [{}]
        self.pointers: set[str] = set()
        self.used: set[str] = set()
        self.ret = ""  # the return type of the function being translated

    # -- the module ----------------------------------------------------------------------------
    def module(self) -> str:
        while self.i < len(self.toks):
            self.top_level()
        m = self.m
        lines = list(m.header)
        if m.uniforms:
            lines += [f"var<private> {safe(n)}: {t};" for n, t in m.uniforms]
        lines.append("var<private> fj_u0: u32;  // 0, unknown to naga: see translate()")
        lines.append("const gl_WorkGroupSize = vec3<u32>({}, {}, {});".format(*m.local_size))
        lines += [HELPERS[h] for h in sorted(self.helpers)]
        lines += m.functions
        params = ", ".join(f"@builtin({BUILTINS[b][0]}) {b}: {BUILTINS[b][1]}"
                           for b in sorted(self.used))
        lines.append("@compute @workgroup_size({}, {}, {})".format(*m.local_size))
        lines.append(f"fn main({params}) {{")
        lines += [f"    {safe(n)} = fj_args.{safe(n)};" for n, _ in m.uniforms]
        lines += m.main
        lines.append("}")
        return "\n".join(lines) + "\n"

    def top_level(self) -> None:
        t = self.peek()
        if t == "shared":
            self.take()
            ty = self.wtype(self.take())
            name = safe(self.take())
            self.take("[")
            n = self.take()
            self.take("]")
            self.take(";")
            self.scopes[0][name] = f"array<{ty}, {n}>"
            self.m.header.append(f"var<workgroup> {name}: array<{ty}, {n}>;")
        elif t == "layout":
            self.layout()
        elif t == "const":
            self.take()
            ty = self.wtype(self.take())
            name = safe(self.take())
            self.take("=")
            value, _ = self.expr()
            self.take(";")
            self.scopes[0][name] = ty
            self.m.header.append(f"const {name}: {ty} = {value};")
        elif t in TYPES:
            self.function()
        else:
            raise WGSLError(f"unexpected {t!r} at module scope")

    def layout(self) -> None:
        self.take("layout")
        self.take("(")
        quals: dict[str, str] = {}
        while not self.accept(")"):
            key = self.take()
            quals[key] = self.take() if self.accept("=") else ""
            self.accept(",")
        if self.accept("in"):
            self.take(";")
            self.m.local_size = tuple(int(quals.get(f"local_size_{d}", "1"))  # type: ignore
                                      for d in "xyz")
            return
        access = "read_write"
        while self.peek() in ("readonly", "restrict", "writeonly", "coherent"):
            if self.take() == "readonly":
                access = "read"
        kind = self.take()
        self.take()  # the block's name
        self.take("{")
        members = []
        while not self.accept("}"):
            ty = self.wtype(self.take())
            name = safe(self.take())
            runtime = self.accept("[")
            if runtime:
                self.take("]")
            self.take(";")
            members.append((name, f"array<{ty}>" if runtime else ty))
        self.take(";")
        binding = quals.get("binding", "0")
        if kind == "buffer":
            if len(members) != 1 or not members[0][1].startswith("array<"):
                raise WGSLError("a storage block must hold one runtime array")
            name, ty = members[0]
            self.scopes[0][name] = ty
            self.m.header.append(f"@group(0) @binding({binding}) var<storage, {access}> "
                                 f"{name}: {ty};")
        elif kind == "uniform":
            self.m.header.append("struct FjArgs { " + " ".join(f"{n}: {t}," for n, t in members)
                                 + " }")
            self.m.header.append(f"@group(0) @binding({binding}) var<uniform> fj_args: FjArgs;")
            self.m.uniforms = members
            for n, t in members:
                self.scopes[0][n] = t
        else:
            raise WGSLError(f"unknown interface block {kind!r}")

    def function(self) -> None:
        ret = self.wtype(self.take())
        name = self.take()
        self.take("(")
        params: list[tuple[str, str, bool]] = []
        while not self.accept(")"):
            out = self.peek() in ("out", "inout")
            if out or self.peek() == "in":
                self.take()
            params.append((self.wtype(self.take()), safe(self.take()), out))
            self.accept(",")
        self.funcs[name] = Func(ret, tuple(p[2] for p in params), tuple(p[0] for p in params))
        self.ret = ret
        body_start = self.i
        self.scopes.append({n: t for t, n, _ in params})
        self.pointers = {n for _, n, o in params if o}
        # parameters the body assigns are copied into variables (WGSL's are immutable)
        assigned = self._assigned_names(body_start)
        head, copies = [], []
        for ty, n, out in params:
            if out:
                head.append(f"{n}: ptr<function, {ty}>")
            elif n in assigned:
                head.append(f"fj_in_{n}: {ty}")
                copies.append(f"    var {n}: {ty} = fj_in_{n};")
            else:
                head.append(f"{n}: {ty}")
        body = self.block(1)
        self.scopes.pop()
        self.pointers = set()
        if name == "main":
            self.m.main = copies + body[1:-1]
            return
        arrow = f" -> {ret}" if ret else ""
        self.m.functions.append("\n".join([f"fn {name}({', '.join(head)}){arrow} {{",
                                           *copies, *body[1:-1], "}"]))

    def _assigned_names(self, start: int) -> set[str]:
        depth, j, names = 0, start, set()
        while j < len(self.toks):
            t = self.toks[j]
            depth += (t == "{") - (t == "}")
            nxt = self.toks[j + 1] if j + 1 < len(self.toks) else ""
            if nxt in ASSIGN or nxt in ("++", "--"):
                names.add(safe(t))
            if t in ("++", "--"):
                names.add(safe(nxt))
            if depth == 0 and t == "}":
                break
            j += 1
        return names

    # -- statements ----------------------------------------------------------------------------
    def block(self, depth: int) -> list[str]:
        """``{ ... }`` as lines (the braces at ``depth - 1``)."""
        pad = "    " * (depth - 1)
        self.take("{")
        self.scopes.append({})
        lines = [pad + "{"]
        while not self.accept("}"):
            lines += self.statement(depth)
        self.scopes.pop()
        return lines + [pad + "}"]

    def body(self, depth: int) -> list[str]:
        """A branch or loop body: its lines inside braces (depth is the braces' own)."""
        if self.peek() == "{":
            return self.block(depth + 1)[1:-1]
        self.scopes.append({})
        lines = self.statement(depth + 1)
        self.scopes.pop()
        return lines

    def statement(self, depth: int) -> list[str]:
        pad = "    " * depth
        t = self.peek()
        if t == "{":
            return self.block(depth + 1)
        if t == "if":
            self.take()
            self.take("(")
            cond, _ = self.expr()
            self.take(")")
            lines = [f"{pad}if ({cond}) {{", *self.body(depth)]
            if self.accept("else"):
                if self.peek() == "if":
                    rest = self.statement(depth)
                    lines.append(f"{pad}}} else {rest[0].lstrip()}")
                    return lines + rest[1:]
                lines += [f"{pad}}} else {{", *self.body(depth)]
            return lines + [pad + "}"]
        if t == "for":
            self.take()
            self.take("(")
            self.scopes.append({})
            before: list[str] = []
            if self.peek() in TYPES or self.peek() == "const":
                before = self.declaration(for_init=True)
            elif self.peek() != ";":
                before = [self.simple()]
            self.take(";")
            cond = "" if self.peek() == ";" else self.expr()[0]
            self.take(";")
            steps = []
            while not self.accept(")"):
                steps.append(self.simple())
                self.accept(",")
            init = before.pop() if len(before) == 1 and len(steps) <= 1 else ""
            if before:  # several variables: declared in a block around the loop
                depth += 1
            inner = "    " * depth
            if len(steps) <= 1:
                lines = [f"{inner}for ({init}; {cond}; {''.join(steps)}) {{", *self.body(depth),
                         inner + "}"]
            else:  # several steps: a loop whose continuing block takes them (as for's would)
                lines = [f"{inner}loop {{",
                         *([f"{inner}    if !({cond}) {{ break; }}"] if cond else []),
                         *self.body(depth),
                         f"{inner}    continuing {{ {' '.join(s + ';' for s in steps)} }}",
                         inner + "}"]
            self.scopes.pop()
            if before:
                lines = [pad + "{", *(f"{inner}{d};" for d in before), *lines, pad + "}"]
            return lines
        if t == "while":
            self.take()
            self.take("(")
            cond, _ = self.expr()
            self.take(")")
            return [f"{pad}while ({cond}) {{", *self.body(depth), pad + "}"]
        if t == "do":
            self.take()
            inner = self.body(depth)
            self.take("while")
            self.take("(")
            cond, _ = self.expr()
            self.take(")")
            self.take(";")
            if cond == "false":
                return [f"{pad}loop {{", *inner, f"{pad}    break;", pad + "}"]
            return [f"{pad}loop {{", *inner, f"{pad}    continuing {{ break if !({cond}); }}",
                    pad + "}"]
        if t == "return":
            self.take()
            if self.accept(";"):
                return [pad + "return;"]
            value, ty = self.expr()
            self.take(";")
            return [f"{pad}return {coerce(value, ty, self.ret)};"]
        if t in ("break", "continue"):
            self.take()
            self.take(";")
            return [f"{pad}{t};"]
        if t == ";":
            self.take()
            return []
        if t == "const" or (t in TYPES and self.peek(1) != "("):
            return [pad + d for d in self.declaration()]
        text = self.simple()
        self.take(";")
        return [f"{pad}{text};"]

    def declaration(self, for_init: bool = False) -> list[str]:
        const = self.accept("const")
        ty = self.wtype(self.take())
        out = []
        while True:
            name = safe(self.take())
            full = ty
            if self.accept("["):
                n = self.take()
                self.take("]")
                full = f"array<{ty}, {n}>"
            init = None
            if self.accept("="):
                init = coerce(*self.expr(), full)
            self.scopes[-1][name] = full
            if const and init is not None:
                kw = "const" if re.fullmatch(r"\(?-?[0-9.xXa-fA-FuUeE+]+\)?", init) else "let"
                out.append(f"{kw} {name}: {full} = {init}")
            else:
                out.append(f"var {name}: {full}" + (f" = {init}" if init is not None else ""))
            if not self.accept(","):
                break
        if for_init:
            return out
        self.take(";")
        return [d + ";" for d in out]

    def simple(self) -> str:
        """An assignment, increment or call (no ``;``): a for loop's init or step too."""
        if self.peek() in ("++", "--"):
            op = self.take()
            target, _ = self.postfix()
            return f"{target}{op}"
        target, want = self.expr()
        op = self.peek()
        if op in ("++", "--"):
            self.take()
            return f"{target}{op}"
        if op in ASSIGN:
            self.take()
            value, have = self.expr()
            if op in ("<<=", ">>="):
                value = self._shift_amount(value)
            else:
                value = coerce(value, have, want)
            return f"{target} {op} {value}"
        return target if "(" in target else f"_ = {target}"


__all__ = ["WGSLError", "translate"]
