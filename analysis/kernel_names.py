"""Readable short names for kernels and host ops: the family kept, templates and parameters dropped.

A CUDA/HIP kernel name is often a whole C++ signature (`void cutlass::device_kernel<flash::...>(...)`
of 600 characters) or a mangled symbol (`_ZN5aiter24add_rmsnorm_quant_kernelI...`). Tables and
charts need a label a person can read; the full name stays alongside for hover text, CSV and JSON.
What is kept is what tells kernels apart for a reader: the library family (cuBLAS, CUTLASS, nvjet,
Tensile, Triton, NCCL), the tile shape of a GEMM, the op of an ATen elementwise/reduce kernel, the
ops fused into a Triton kernel. The categoriser (analysis/categories.py) reads these short names,
so a family the short name keeps is a family the rule table can see.

Work is done once per distinct name (`short_names` maps categorical codes), never per event.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pandas as pd

MAX_CHARS = 80
_SCAN_CHARS = 4000  # names can be kilobytes of template arguments; the family is always near the start

_TILE = re.compile(r"(\d+x\d+(?:x\d+)?)")
_TRITON = re.compile(r"^triton_(?:poi|red|per|tem|mm|bmm|for)_fused_?(.*)$")
_TRTLLM_BMM = re.compile(r"^bmm_(\w+?)_t(\d+x\d+x\d+)")
_ATEN_KERNEL = re.compile(r"elementwise|reduce_kernel|CatArray|multi_tensor_apply|gather|index_")
_CUTLASS_ARCH = re.compile(r"cutlass_?(\d\d)_")
_MANGLED_PART = re.compile(r"(\d+)([A-Za-z_][A-Za-z0-9_]*)")

# ATen elementwise/reduce kernels: the op lives in a functor or lambda inside the template arguments.
_ATEN_OPS = (
    (re.compile(r"CatArrayBatchedCopy"), "cat"),
    (re.compile(r"direct_copy_kernel|_copy_kernel|\bcopy_kernel|CopyFunctor|Copy<"), "copy"),
    (re.compile(r"MulFunctor|mul_kernel"), "mul"),
    (re.compile(r"DivFunctor|div_\w*kernel|div_true|div_floor|div_trunc"), "div"),
    (re.compile(r"CUDAFunctor(?:OnSelf)?_add|AddFunctor|add_kernel"), "add"),
    (re.compile(r"SubFunctor|sub_kernel"), "sub"),
    (re.compile(r"FillFunctor|fill_kernel"), "fill"),
    (re.compile(r"masked_fill"), "masked_fill"),
    (re.compile(r"Compare(\w+?)Functor"), None),  # eq, ne, lt ... taken from the match
    (re.compile(r"pow_tensor\w*kernel|pow_kernel"), "pow"),
    (re.compile(r"\brsqrt_kernel"), "rsqrt"),
    (re.compile(r"\bsqrt_kernel"), "sqrt"),
    (re.compile(r"silu_kernel"), "silu"),
    (re.compile(r"gelu_kernel|GeluCUDAKernel"), "gelu"),
    (re.compile(r"sigmoid_kernel"), "sigmoid"),
    (re.compile(r"tanh_kernel"), "tanh"),
    (re.compile(r"exp_kernel"), "exp"),
    (re.compile(r"neg_kernel"), "neg"),
    (re.compile(r"\bcos_kernel"), "cos"),
    (re.compile(r"\bsin_kernel"), "sin"),
    (re.compile(r"where_kernel"), "where"),
    (re.compile(r"clamp\w*kernel"), "clamp"),
    (re.compile(r"arange"), "arange"),
    (re.compile(r"MeanOps"), "mean"),
    (re.compile(r"ArgMaxOps"), "argmax"),
    (re.compile(r"ArgMinOps"), "argmin"),
    (re.compile(r"MaxOps|max_kernel"), "max"),
    (re.compile(r"MinOps|min_kernel"), "min"),
    (re.compile(r"func_wrapper_t<bool.*and_kernel|and_kernel"), "all"),
    (re.compile(r"or_kernel"), "any"),
    (re.compile(r"sum_kernel|SumOps|sum_functor"), "sum"),
    (re.compile(r"index_kernel|index_put"), "index"),
    (re.compile(r"gather_kernel"), "gather"),
    (re.compile(r"scatter"), "scatter"),
    (re.compile(r"softmax", re.I), "softmax"),
    (re.compile(r"bitwise_not|BitwiseNot"), "bitwise_not"),
    (re.compile(r"abs_kernel"), "abs"),
)


def short_name(name: str) -> str:
    """One readable label of at most MAX_CHARS characters for a kernel or host op name."""
    text = str(name).strip()
    return _label(text[:_SCAN_CHARS]) if text else ""


@functools.lru_cache(maxsize=4096)  # at most 4,096 prefixes of _SCAN_CHARS: 16 MB in the worst case
def _label(text: str) -> str:
    """short_name of a name's scanned prefix, remembered: one analysis labels the same distinct names in several
    passes (categories, anatomy, the model proposal), and a label of kilobytes of template arguments costs a
    fraction of a millisecond (issue 39: analysis time should grow with events, not with name bytes)."""
    label = _short(text)
    label = re.sub(r"\s+", " ", label).strip() or text[:MAX_CHARS]
    return label if len(label) <= MAX_CHARS else label[: MAX_CHARS - 1] + "…"


def short_names(names: pd.Series | pd.Categorical | np.ndarray) -> pd.Categorical:
    """Short names for a column of names, computed once per distinct name (codes are reused)."""
    cat = pd.Categorical(names) if not isinstance(names, pd.Categorical) else names
    if isinstance(names, pd.Series) and isinstance(names.dtype, pd.CategoricalDtype):
        cat = names.array
    shorts = [short_name(c) for c in cat.categories]
    uniq, inverse = np.unique(np.asarray(shorts, dtype=object).astype(str), return_inverse=True)
    codes = cat.codes
    new_codes = np.where(codes >= 0, np.append(inverse, -1)[codes], -1)
    return pd.Categorical.from_codes(new_codes, categories=pd.Index(uniq, dtype=object))


def _short(text: str) -> str:
    lower = text.lower()
    if lower.startswith(("memcpy", "memset")):
        return text
    if text.startswith("_Z"):
        return _demangled_family(text)
    triton = _TRITON.match(text)
    if triton:
        ops = [p for p in re.sub(r"_?\d+$", "", triton.group(1)).split("_") if p]
        ops = list(dict.fromkeys(ops))  # keep order, drop repeats
        return "triton fused: " + " ".join(ops) if ops else "triton fused kernel"
    if text.startswith("nvjet"):
        tile = _TILE.search(text)
        return "nvjet gemm" + (f" {tile.group(1)}" if tile else "") + (" splitK" if "splitK" in text else "")
    bmm = _TRTLLM_BMM.match(text)
    if bmm:  # TensorRT-LLM's generated batched GEMMs (fused MoE experts on Blackwell)
        return f"trtllm bmm {bmm.group(1)} {bmm.group(2)}" + (" swiglu" if "swiGlu" in text else "")
    if text.startswith("Cijk_"):
        tile = re.search(r"_MT(\d+x\d+x\d+)", text)
        return "tensile gemm" + (f" {tile.group(1)}" if tile else "")
    if "xmma_gemm" in text or ("gemm" in lower and "cublas" in lower):
        tile = re.search(r"tilesize(\d+x\d+(?:x\d+)?)", text) or _TILE.search(text)
        arch = re.match(r"(sm\d+)", text)
        parts = ["cublas gemm", tile.group(1) if tile else "", f"({arch.group(1)})" if arch else ""]
        return " ".join(p for p in parts if p) + (" splitK" if "splitk" in lower else "")
    if "FlashAttn" in text or "flash::" in text:
        return _flash_family(text)
    if "at::native::" in text and _ATEN_KERNEL.search(text):
        return _aten_kernel(text)
    if "<" not in text and "(" not in text:
        return text  # already a plain name: aten::mm, kernel_unified_attention_2d, a region label
    core = _core_name(text)
    if core.startswith("cutlass::") or "cutlass" in core.lower():
        return _cutlass_family(text, core)
    return core


def _flash_family(text: str) -> str:
    m = re.search(r"FlashAttn(Fwd|Bwd)(Sm\d+)", text)
    if m:
        return f"flash_attn_{m.group(1).lower()}_{m.group(2).lower()}"
    m = re.search(r"flash(?:::|_)\w*?(fwd|bwd)\w*", text)
    return f"flash_attn_{m.group(1)}" if m else "flash_attn"


def _cutlass_family(text: str, core: str) -> str:
    inner = re.search(r"<\s*([A-Za-z_][\w]*)", text)  # cutlass::Kernel2<cutlass_80_simt_sgemm_...>
    family = inner.group(1) if inner and "cutlass" in inner.group(1) else core
    tile = _TILE.search(family) or _TILE.search(text)
    kind = "gemm" if re.search(r"gemm|Gemm|GEMM|mma|Mma", text) else core.split("::")[-1]
    arch = _CUTLASS_ARCH.search(family)
    label = f"cutlass {kind}" + (f" {tile.group(1)}" if tile else "")
    return label + (f" (sm{arch.group(1)})" if arch else "")


def _aten_kernel(text: str) -> str:
    kind = "reduce" if "reduce_kernel" in text else "elementwise"
    for pattern, op in _ATEN_OPS:
        m = pattern.search(text)
        if m:
            label = op or m.group(1).lower()
            if label in ("cat", "gather", "index", "scatter"):
                kind = "copy" if label == "cat" else "indexing"
            return f"aten {kind}: {label}"
    core = _core_name(text).split("::")[-1]
    return f"aten {kind}: {core}"


def _core_name(text: str) -> str:
    """The function's qualified name without return type, template arguments or parameters."""
    t = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "")
    t = _drop_nested(t, "<", ">")
    t = _drop_nested(t, "(", ")")
    t = t.strip()
    name = t.split()[-1] if t.split() else t
    parts = [p for p in name.split("::") if p]
    if len(parts) > 2:
        parts = [parts[0], parts[-1]]
    return "::".join(parts)


_INNERMOST = {"<": re.compile(r"<[^<>]*>"), "(": re.compile(r"\([^()]*\)")}
_NESTED_PASSES = 16  # innermost-group passes before the bracket walk takes over (deeper nesting is rare)


def _drop_nested(text: str, open_: str, close: str) -> str:
    """Remove every balanced open...close group (and what it holds), keeping the rest; a close with nothing open is
    kept, an open never closed drops the rest. Innermost groups are removed by a compiled pattern, pass after pass
    (a name's template arguments are kilobytes: a walk of its characters in Python cost a millisecond a name); a
    name nested deeper than _NESTED_PASSES is finished by a walk of its brackets. Once no group is left, every close
    comes before every open, so what stays is the text up to the first open."""
    if open_ not in text:
        return text
    inner = _INNERMOST[open_]
    for _ in range(_NESTED_PASSES):
        text, removed = inner.subn("", text)
        if not removed:
            cut = text.find(open_)
            return text if cut < 0 else text[:cut]
    return _walk_brackets(text, open_, close)


def _walk_brackets(text: str, open_: str, close: str) -> str:
    """_drop_nested by walking the brackets one by one (the text between them taken whole)."""
    out = []
    depth = 0
    for token in re.split(f"([{re.escape(open_)}{re.escape(close)}])", text):
        if token == open_:
            depth += 1
        elif token == close and depth:
            depth -= 1
        elif depth == 0:
            out.append(token)
    return "".join(out)


def _demangled_family(text: str) -> str:
    """The qualified name of an Itanium-mangled symbol: `_ZN5aiter24add_rmsnorm_quant_kernelI...` ->
    `aiter::add_rmsnorm_quant_kernel`. For a generic entry point (ck_tile::kentry) the first
    named template argument is the kernel, so it is kept too."""
    body = text[2:]
    nested = body.startswith("N")
    pos = 1 if nested else 0
    parts: list[str] = []
    while pos < len(body):
        m = _MANGLED_PART.match(body, pos)
        if not m:
            break
        length = int(m.group(1))
        ident = body[m.start(2) : m.start(2) + length]
        parts.append(ident)
        pos = m.start(2) + length
        if not nested:
            break
    if not parts:
        return text[:MAX_CHARS]
    name = "::".join(parts)
    if parts[-1] in ("kentry", "kernel", "entry"):
        for inner in re.finditer(r"(?<!\d)(\d+)(?=[A-Za-z_])", body[pos:]):
            length = int(inner.group(1))
            ident = body[pos + inner.end() : pos + inner.end() + length]
            if length >= 3 and len(ident) == length and ident != parts[0]:
                name += ": " + ident
                break
    return name


# --- Labels that stay unique in one table: the family name, plus what tells two kernels of one family apart.

_DTYPES = (
    (re.compile(r"BFloat16|bfloat16|\bbf16|_bf16"), "bf16"),
    (re.compile(r"Float8_e4m3|fp8e4|e4m3"), "fp8 e4m3"),
    (re.compile(r"Float8_e5m2|e5m2"), "fp8 e5m2"),
    (re.compile(r"c10::Half|\bHalf\b|float16|\bfp16|__half"), "fp16"),
    (re.compile(r"\bdouble\b"), "fp64"),
    (re.compile(r"\bfloat\b|float32|\bfp32"), "fp32"),
    (re.compile(r"\blong\b|int64"), "int64"),
    (re.compile(r"\bint\b|int32"), "int32"),
    (re.compile(r"\bbool\b"), "bool"),
)
_VARIANTS = (
    (re.compile(r"vectorized_elementwise_kernel<(\d+)"), "vectorized x{}"),
    (re.compile(r"unrolled_elementwise_kernel"), "unrolled"),
    (re.compile(r"elementwise_kernel<(\d+), (\d+)"), "{}x{} threads"),
    (re.compile(r"reduce_kernel<(\d+), (\d+)"), "reduce {}x{}"),
)
_TOKEN = re.compile(r"[A-Za-z0-9]+")


def _dtype_tag(name: str) -> str:
    """The first element type the name states (a functor's tensor type comes before its compute type)."""
    best = None
    for pattern, tag in _DTYPES:
        m = pattern.search(name[:_SCAN_CHARS])
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), tag)
    return best[1] if best else ""


def _variant_tag(name: str) -> str:
    for pattern, text in _VARIANTS:
        m = pattern.search(name[:_SCAN_CHARS])
        if m:
            return text.format(*m.groups())
    return ""


def _tile_tag(name: str) -> str:
    tiles = _TILE.findall(name[:_SCAN_CHARS])
    return " ".join(dict.fromkeys(tiles))


def _first_difference(name: str, others: list[str]) -> str:
    """The first token of `name` that no other name has at the same place (Tensile's NTA4 against NTA0)."""
    mine = _TOKEN.findall(name[:_SCAN_CHARS])
    theirs = [_TOKEN.findall(o[:_SCAN_CHARS]) for o in others]
    for i, token in enumerate(mine):
        if all(i >= len(t) or t[i] != token for t in theirs):
            return token[:24]
    return ""


def distinct_short_names(names: list[str]) -> list[str]:
    """Short names for the rows of one table, unique where the kernels differ: a family that several full names
    share gets what tells them apart (element type, the ATen kernel's variant, a tile, else the first token that
    differs), e.g. "aten elementwise: mul [bf16, vectorized x4]" against "aten elementwise: mul [fp32, 128x2
    threads]". The same full name keeps the same label."""
    names = [str(n) for n in names]
    shorts = [short_name(n) for n in names]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(shorts):
        groups.setdefault(s, []).append(i)
    out = list(shorts)
    for short, rows in groups.items():
        distinct = list(dict.fromkeys(names[i] for i in rows))
        if len(distinct) < 2:
            continue
        tags = {n: [] for n in distinct}
        for feature in (_dtype_tag, _variant_tag, _tile_tag):
            values = {n: feature(n) for n in distinct}
            if len(set(values.values())) > 1:
                for n in distinct:
                    if values[n]:
                        tags[n].append(values[n])
            if len({tuple(t) for t in tags.values()}) == len(distinct):
                break
        else:
            before = {n: tuple(t) for n, t in tags.items()}
            for n in distinct:  # still alike: the first token that differs
                same = [o for o in distinct if o != n and before[o] == before[n]]
                if same:
                    tags[n].append(_first_difference(n, same) or f"#{distinct.index(n) + 1}")
        for i in rows:
            tag = ", ".join(t for t in tags[names[i]] if t)
            out[i] = f"{short} [{tag}]" if tag else short
    return out
