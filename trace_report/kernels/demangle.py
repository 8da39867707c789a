"""Itanium C++ demangling, the part kernel names need: `_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel...EEEvNT_6ParamsE`
-> `void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::conv::kernel::...>(...::Params)`.

Most profilers write kernel names demangled; some traces carry the symbol as compiled (ROCm's, and NVIDIA kernels that
CUPTI could not demangle). This reads nested names, template arguments (types, literals, packs), substitutions and
template parameters, qualifiers, pointers and references, and a function's parameter types: what a GPU kernel's symbol
holds. Anything else (expressions, lambdas' closure types, operator names) ends the reading: `demangle` then returns
the symbol unchanged, never raises. No library: the report must run where c++filt does not.
"""

from __future__ import annotations

from functools import lru_cache


BUILTIN = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
    "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long", "x": "long long",
    "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float", "d": "double",
    "e": "long double", "g": "__float128", "z": "...",
}
BUILTIN_D = {"Dh": "half", "DF16b": "__bf16", "Di": "char32_t", "Ds": "char16_t", "Du": "char8_t", "Dn": "decltype(nullptr)", "Da": "auto",
             "Dc": "decltype(auto)"}
STD_SUBSTITUTIONS = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
                     "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}


class _Unreadable(Exception):
    """The symbol uses a part of the grammar this reader does not cover."""


@lru_cache(maxsize=4096)
def demangle(symbol: str) -> str:
    """The symbol demangled, or unchanged when it is not mangled or uses what this reader does not cover."""
    if not symbol.startswith("_Z"):
        return symbol
    try:
        reader = _Reader(symbol, 2)
        text = reader.encoding()
        if reader.pos != len(symbol) and not symbol[reader.pos] == ".":  # `.cold`, `.isra.0`: clones keep the name
            raise _Unreadable
        return text
    except (_Unreadable, IndexError, ValueError, RecursionError):
        return _qualified_name(symbol)


def _qualified_name(symbol: str) -> str:
    """What can be read of a symbol the grammar above does not cover, or that the trace cut short (CUPTI truncates
    long names): its qualified name, `ck::tensor_operation::device::kernel_grouped_conv_fwd<…>(…)`; else the symbol."""
    if not symbol.startswith("_ZN"):
        return symbol
    reader = _Reader(symbol, 3)
    words = []
    try:
        while reader.peek() in "0123456789L":
            if reader.peek() == "L":
                reader.pos += 1
                continue
            words.append(reader.source_name())
    except (_Unreadable, IndexError, ValueError):
        pass
    if not words:
        return symbol
    return "::".join(words) + ("<…>" if reader.pos < len(symbol) and symbol[reader.pos] == "I" else "") + "(…)"


class _Reader:
    def __init__(self, text: str, pos: int):
        self.text = text
        self.pos = pos
        self.subs: list[str] = []  # the substitution candidates, in the order the grammar adds them
        self.template_args: list[str] = []  # the outermost template's arguments, for T_ references

    def peek(self, n: int = 1) -> str:
        if self.pos >= len(self.text):
            raise _Unreadable  # cut short: every loop below waits for a character that will not come
        return self.text[self.pos : self.pos + n]

    def take(self, expected: str) -> None:
        if not self.text.startswith(expected, self.pos):
            raise _Unreadable
        self.pos += len(expected)

    def encoding(self) -> str:
        name, is_template = self.name()
        if self.pos >= len(self.text) or self.peek() in ("E", "."):
            return name
        if is_template:
            self.type()  # a template function's encoding starts with its return type, which a kernel's is (void)
        params = self.params()
        return f"{'void ' if is_template else ''}{name}({params})"

    def params(self) -> str:
        types = []
        while self.pos < len(self.text) and self.peek() not in ("E", "."):
            types.append(self.type())
        return "" if types == ["void"] else ", ".join(types)

    def name(self) -> tuple[str, bool]:
        """A name, and whether it ends in template arguments."""
        if self.text.startswith("N", self.pos):
            return self.nested(top=True)
        if self.text.startswith("Z", self.pos):
            raise _Unreadable  # a local name (inside a function): lambdas, static locals
        if self.peek(2) == "St":
            self.pos += 2
            base = "std::" + self.source_name()
        elif self.text.startswith("S", self.pos):
            base = self.substitution()
            if not self.text.startswith("I", self.pos):
                raise _Unreadable
        else:
            base = self.source_name()
        if self.text.startswith("I", self.pos):
            self.subs.append(base)
            args = self.template_arguments(top=True)
            full = base + args
            self.subs.append(full)
            return full, True
        return base, False

    def nested(self, top: bool = False) -> tuple[str, bool]:
        """N ... E; `top`: the function's own name, whose last template arguments T_ refers to."""
        self.take("N")
        while self.peek() in ("r", "V", "K"):
            self.pos += 1
        parts: list[str] = []
        prefix = ""
        is_template = False
        while self.peek() != "E":
            c = self.peek()
            if c == "I":
                prefix += self.template_arguments(top=top)
                is_template = True
            elif c == "S":
                prefix = self.substitution() if not prefix else prefix + "::" + self.substitution()
                is_template = False
                continue  # a substitution is not itself a new candidate
            elif c == "T":
                prefix = self.template_param()
                is_template = False
            elif c in "CD" and self.peek(2)[1:] in ("1", "2", "3", "0", "4", "5"):
                last = parts[-1] if parts else prefix.rsplit("::", 1)[-1]
                last = last.split("<", 1)[0]
                prefix += "::" + ("~" if c == "D" else "") + last
                self.pos += 2
                is_template = False
            elif c == "L":
                self.pos += 1  # an internal-linkage marker before a source name
                continue
            else:
                word = self.source_name()
                parts.append(word)
                prefix = word if not prefix else prefix + "::" + word
                is_template = False
            self.subs.append(prefix)
        self.take("E")
        if self.subs and self.subs[-1] == prefix:
            self.subs.pop()  # the whole name is not a candidate, only its prefixes
        return prefix, is_template

    def source_name(self) -> str:
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        if start == self.pos:
            raise _Unreadable
        length = int(self.text[start : self.pos])
        word = self.text[self.pos : self.pos + length]
        if len(word) != length:
            raise _Unreadable
        self.pos += length
        return "(anonymous namespace)" if word.startswith("_GLOBAL__N") else word

    def substitution(self) -> str:
        two = self.peek(2)
        if two in STD_SUBSTITUTIONS:
            self.pos += 2
            if two == "St":
                return "std::" + self.source_name()
            return STD_SUBSTITUTIONS[two]
        self.take("S")
        if self.text.startswith("_", self.pos):
            self.pos += 1
            return self.subs[0]
        start = self.pos
        while self.peek() != "_":
            if not self.peek().isalnum():
                raise _Unreadable
            self.pos += 1
        index = int(self.text[start : self.pos], 36) + 1
        self.pos += 1
        return self.subs[index]

    def template_param(self) -> str:
        self.take("T")
        start = self.pos
        while self.peek() != "_":
            self.pos += 1
        index = int(self.text[start : self.pos], 36) + 1 if self.pos > start else 0
        self.pos += 1
        return self.template_args[index] if index < len(self.template_args) else f"T{index}"

    def template_arguments(self, top: bool = False) -> str:
        self.take("I")
        args = []
        while self.peek() != "E":
            args.append(self.template_argument())
        self.pos += 1
        if top:
            self.template_args = args
        return "<" + ", ".join(args) + ">"

    def template_argument(self) -> str:
        c = self.peek()
        if c == "L":
            return self.literal()
        if c == "J":  # a pack
            self.pos += 1
            items = []
            while self.peek() != "E":
                items.append(self.template_argument())
            self.pos += 1
            return ", ".join(items)
        if c == "X":  # an expression: the one kernels carry is a function's address, `&silu<T>`
            self.pos += 1
            if self.peek(2) != "ad":
                raise _Unreadable
            self.pos += 2
            operand = self.template_argument()
            self.take("E")
            return "&" + operand
        if self.peek(2) in ("Tn", "Ty", "Tt"):  # C++20's declaration of the parameter, before its argument
            kind = self.peek(2)
            self.pos += 2
            if kind == "Tn":
                self.type()
            return self.template_argument()
        return self.type()

    def literal(self) -> str:
        self.take("L")
        if self.peek(2) == "_Z":
            self.pos += 2
            text = self.encoding()
            self.take("E")
            return text
        kind = self.type()
        start = self.pos
        while self.peek() != "E":
            self.pos += 1
        value = self.text[start : self.pos].replace("n", "-", 1) if self.text[start : start + 1] == "n" else self.text[start : self.pos]
        self.pos += 1
        if kind == "bool":
            return "true" if value == "1" else "false"
        if kind in ("int", "long", "unsigned int", "unsigned long", "long long", "unsigned long long", "char"):
            suffix = {"unsigned int": "u", "long": "l", "unsigned long": "ul", "long long": "ll", "unsigned long long": "ull"}
            return value + suffix.get(kind, "")
        return f"({kind}){value}"

    def type(self) -> str:
        c = self.peek()
        if c in BUILTIN:
            self.pos += 1
            return BUILTIN[c]
        two = self.peek(2)
        if self.peek(5) == "DF16b":  # std::bfloat16_t (__bf16), as GCC 13 and clang 17 mangle it
            self.pos += 5
            return "__bf16"
        if two in BUILTIN_D:
            self.pos += 2
            return BUILTIN_D[two]
        if two == "DF":  # _FloatN: DF16_ is half-precision
            self.pos += 2
            start = self.pos
            while self.peek() != "_":
                self.pos += 1
            bits = self.text[start : self.pos]
            self.pos += 1
            return f"_Float{bits}"
        if c in "KVr":
            self.pos += 1
            inner = self.type()
            result = f"{inner} {'const' if c == 'K' else 'volatile' if c == 'V' else 'restrict'}"
        elif c in "PRO":
            self.pos += 1
            inner = self.type()
            result = inner + {"P": "*", "R": "&", "O": "&&"}[c]
        elif c == "A":
            self.pos += 1
            start = self.pos
            while self.peek() != "_":
                self.pos += 1
            size = self.text[start : self.pos]
            self.pos += 1
            result = f"{self.type()} [{size}]"
        elif c == "F":
            self.pos += 1
            returns = self.type()
            params = self.params()
            self.take("E")
            result = f"{returns} ({params})"
        elif two == "Dp":
            self.pos += 2
            return self.type() + "..."
        elif c == "S" and two != "St":
            base = self.substitution()
            if self.text.startswith("I", self.pos):
                base += self.template_arguments()
                self.subs.append(base)
            return base
        elif c == "T":
            result = self.template_param()
            if self.text.startswith("I", self.pos):
                self.subs.append(result)
                result += self.template_arguments()
        elif c == "N" or c.isdigit() or two == "St":
            result, _ = self.name_as_type()
        elif c == "u":  # a vendor extended type
            self.pos += 1
            result = self.source_name()
        else:
            raise _Unreadable
        self.subs.append(result)
        return result

    def name_as_type(self) -> tuple[str, bool]:
        if self.text.startswith("N", self.pos):
            return self.nested()
        if self.peek(2) == "St":
            self.pos += 2
            base = "std::" + self.source_name()
        else:
            base = self.source_name()
        if self.text.startswith("I", self.pos):
            self.subs.append(base)
            return base + self.template_arguments(), True
        return base, False
