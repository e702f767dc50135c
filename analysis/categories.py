"""What each kernel (or host op) does: one ordered rule table, first match wins.

Rules are regexes over the kernel's short name (analysis/kernel_names.py), which keeps the family
and drops template/parameter text: matching the full C++ signature would let a parameter type
(`flashinfer::QuantizationSFLayout` in a quantize kernel) decide the category. User rules (a TOML
file of `category = [regex, ...]`) are tried first, on the full name (its first MATCH_CHARS characters:
analysis/names.py) and on the short name.

On CPU traces the "kernels" are host ops, nested per thread. An op's self time (its duration
minus its direct children's) goes to the category of its nearest categorised ancestor, itself
included, so aten::mm's own children (as_strided, resolve_conj) count as gemm. "framework"
(views, allocation, dispatch, dynamo guards) is a weak category: it only takes time that no
compute op above it claims.

Categorising is one pass over the distinct names; everything per event is numpy indexing.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stepscope.contracts.safe_read import read_regular_text
from .kernel_names import short_names
from .names import match_text
from .user_patterns import UserPattern, compile_user_pattern

CATEGORIES = (
    "gemm",
    "attention",
    "norm",
    "elementwise",
    "rotary",
    "embedding",
    "kv_cache",
    "sampling",
    "communication",
    "moe",
    "memcpy",
    "memset",
    "framework",
    "other",
)
MAX_RULES_BYTES = 1 << 20  # a rules file is a few lines; anything far larger is not one
WEAK = ("framework",)  # host overhead: only where no compute op above claims the time
# Host ops that wrap a whole graph: their category covers their own self time only and passes
# nothing down (the ops run inside a compiled region keep their own categories).
CONTAINERS = re.compile(r"^Torch-Compiled Region")

_ATEN_VIEWS = (
    "view|_unsafe_view|view_as|reshape|_reshape_alias|as_strided|transpose|t|slice|select|narrow|expand|expand_as"
    "|unsqueeze|squeeze|permute|contiguous|detach|detach_|alias|lift_fresh|resolve_conj|resolve_neg|split"
    "|split_with_sizes|chunk|unbind|unflatten|flatten|numpy_T|_has_compatible_shallow_copy_type|set_"
)
_ATEN_ALLOC = "empty|empty_like|empty_strided|resize_|to|_to_copy|result_type|item|_local_scalar_dense|is_nonzero|lift"
_ATEN_ELEMENTWISE = (
    "add|add_|sub|sub_|rsub|mul|mul_|div|div_|neg|exp|log|abs|sqrt|clamp|clamp_|where|masked_fill|masked_fill_"
    "|copy_|clone|cat|stack|fill_|zero_|zeros|zeros_like|ones|ones_like|full|full_like|arange|scalar_tensor"
    "|silu|silu_|gelu|relu|sigmoid|tanh|eq|ne|lt|gt|le|ge|bitwise_and|bitwise_or|bitwise_not|__and__|__or__"
    "|__iand__|__ior__|logical_and|logical_or|logical_not|any|all|max|min|maximum|minimum|sum|triu|tril"
    "|gather|index|index_put_|scatter|scatter_|repeat|repeat_interleave|roll|pad|constant_pad_nd|_softmax_backward"
)

# (category, regex over the short name). Order matters: the first match wins.
BUILTIN_RULES: tuple[tuple[str, str], ...] = (
    ("memcpy", r"(?i)^memcpy\b"),
    ("memset", r"(?i)^memset\b"),
    # collectives, NCCL/RCCL and the custom all-reduce kernels of vLLM/SGLang/TensorRT-LLM
    (
        "communication",
        r"(?i)nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce"
        r"|custom_?ar\b|multimem|mscclpp|quick_?reduce|c10d::|record_param_comms|^gloo",
    ),
    # attention kernels whose names also say "KVCache"; must come before kv_cache
    ("attention", r"BatchDecodeWithPagedKVCache|BatchPrefillWithPagedKVCache|PagedKVCacheKernel"),
    (
        "kv_cache",
        r"(?i)reshape_and_cache|store_kv_?cache|kv_?cache|concat_and_cache|copy_blocks|swap_blocks"
        r"|set_kv_buffer|^aten::index_copy_?$",
    ),
    # fused experts and their routing (before gemm: an expert GEMM is moe time)
    (
        "moe",
        r"(?i)moe|fused_experts|expert|_matmul_ogs|finalize_matmul|bitmatrix|combined_routing|_topk_forward"
        r"|routing|trtllm bmm|align_block_size|topk_softmax|topkGating|grouped_topk",
    ),
    (
        "attention",
        r"(?i)flash|fmha|attention|attn|sdpa|scaled_dot_product|xformers|mha_|_mla_|mla_decode"
        r"|decode_att|extend_att|^reduce_segments$|paged_attention|unified_attention",
    ),
    ("rotary", r"(?i)rotary|\brope\b|_rope|rope_|mrope|cos_sin|^aten::(cos|sin)$|aten elementwise: (cos|sin)$"),
    (
        "norm",
        r"(?i)rms_?norm|layer_?norm|group_?norm|batch_?norm|Rmsnorm2d|Layernorm2d|norm_kernel|_norm_fwd"
        r"|^aten::(rsqrt|mean|pow|var|var_mean)$|aten (elementwise|reduce): (rsqrt|mean|pow)$"
        r"|triton fused: .*\brsqrt\b",
    ),
    ("embedding", r"(?i)embedding|embed|indexSelect|^aten::index_select$|vocab_parallel"),
    (
        "sampling",
        r"(?i)softmax|top_?k|top_?p|argmax|argmin|sampl|multinomial|penalt|logit|gumbel|exponential_"
        r"|radix_?sort|\bsort\b|^aten::sort|cumsum|scan|^aten::isin$|^rocprim::|^cub::|temperature",
    ),
    (
        "gemm",
        r"(?i)gemm|gemv|matmul|cublas|cutlass|nvjet|xmma|wgmma|tensile|hipblaslt|splitk|marlin|machete"
        r"|_scaled_mm|^aten::(mm|bmm|addmm|baddbmm|linear|matmul|_addmm_activation|dot|mv)$"
        r"|^nn\.Module: (Linear|Conv1D|ColumnParallelLinear|RowParallelLinear|QKVParallelLinear|ReplicatedLinear)",
    ),
    (
        "elementwise",
        r"(?i)^aten (elementwise|reduce|copy|indexing)|^triton fused|act_and_mul|silu|gelu|swiglu"
        r"|relu|activation|_quant|quantize|dequant|fill|copy|^aten::(" + _ATEN_ELEMENTWISE + r")$",
    ),
    # inductor's fused C++ kernels run inside the compiled region without op events of their own, so the
    # region's self time is mostly that fused elementwise/norm/rotary work (plus its wrapper code)
    ("elementwise", r"^Torch-Compiled Region"),
    (
        "framework",
        r"^aten::(" + _ATEN_VIEWS + "|" + _ATEN_ALLOC + r")$|^detach_?$|TorchDynamo"
        r"|Pregraph bytecode|AOTDispatcher|CompiledFxGraph|CompiledFunction|torch_dynamo_resume|autograd::"
        r"|^cuda(Graph|Stream|Event|Malloc|Free|Memcpy|Memset|Launch)|^hip(Graph|Launch|Malloc|Free)",
    ),
)


@dataclass(frozen=True)
class Rule:
    category: str
    pattern: re.Pattern[str] | UserPattern  # built-in rules: Python's re; a user's: RE2 (analysis/user_patterns.py)
    source: str  # "built-in" or the user file it came from

    @property
    def user(self) -> bool:
        return self.source != "built-in"


BUILTIN = tuple(Rule(cat, re.compile(rx), "built-in") for cat, rx in BUILTIN_RULES)


def load_rules(path: str | Path) -> tuple[Rule, ...]:
    """User rules from a TOML file of `category = ["regex", ...]`; ValueError with one line when bad. The file is
    read only when it is a regular file of at most MAX_RULES_BYTES; each regex is compiled for RE2 (linear time)."""
    path = Path(path)
    try:
        data = tomllib.loads(read_regular_text(path, MAX_RULES_BYTES))
    except FileNotFoundError:
        raise ValueError(f"no categories file at {path}") from None
    except OSError as exc:  # not a regular file (a FIFO, a device), too large, unreadable
        raise ValueError(f"cannot read the categories file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read the categories file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nested arrays or tables
        raise ValueError(f"{path} is not a categories file: its arrays or tables are nested too deeply") from None
    rules: list[Rule] = []
    for category, patterns in data.items():
        if category not in CATEGORIES:
            raise ValueError(f"{path}: unknown category {category!r} (known: {', '.join(CATEGORIES)})")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"{path}: {category} must be a list of regex strings")
        for rx in patterns:
            rules.append(Rule(category, compile_user_pattern(rx, f"{path}: the {category} rule"), str(path)))
    return tuple(rules)


def category_of(name: str, short: str, user_rules: tuple[Rule, ...] = ()) -> str:
    """The category of one name (user rules first, on the full or short name; then the table)."""
    rule = matching_rule(name, short, user_rules)
    return rule.category if rule else "other"


def matching_rule(name: str, short: str, user_rules: tuple[Rule, ...] = ()) -> Rule | None:
    text = match_text(name)  # a bounded prefix of a name of kilobytes (analysis.names)
    for rule in user_rules:
        if rule.pattern.search(text) or rule.pattern.search(short):
            return rule
    for rule in BUILTIN:
        if rule.pattern.search(short):
            return rule
    return None


def categorize(
    names: pd.Series | pd.Categorical, user_rules: tuple[Rule, ...] = ()
) -> tuple[pd.Categorical, pd.Categorical]:
    """(short names, categories) for a column of names, one regex pass per distinct name."""
    cat = names.array if isinstance(names, pd.Series) and isinstance(names.dtype, pd.CategoricalDtype) else None
    if cat is None:
        cat = names if isinstance(names, pd.Categorical) else pd.Categorical(np.asarray(names, dtype=object))
    shorts_per_cat = short_names(pd.Categorical(cat.categories))
    short_list = np.asarray(shorts_per_cat, dtype=object)
    cats = [category_of(str(n), str(s), user_rules) for n, s in zip(cat.categories, short_list, strict=True)]
    code_of = {c: i for i, c in enumerate(CATEGORIES)}
    cat_codes = np.array([code_of[c] for c in cats] + [code_of["other"]], dtype=np.int64)
    codes = cat.codes
    category = pd.Categorical.from_codes(cat_codes[np.where(codes >= 0, codes, len(cats))], categories=CATEGORIES)
    short_cat = pd.Categorical.from_codes(
        np.where(codes >= 0, np.append(shorts_per_cat.codes, -1)[codes], -1), categories=shorts_per_cat.categories
    )
    return short_cat, category


def nesting_parents(tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, parent, depth) for host ops nested per thread, vectorised.

    `order` sorts the ops by (tid, ts, longest first); `parent[i]` (in that order) is the index of
    the innermost op that was open when op i started, -1 for a top-level op. An op's depth is the
    number of ops of its thread started before it minus those ended by its start.
    """
    sort, parent, depth, _ = _nesting(tid, ts, dur)
    return (np.arange(len(ts)) if sort is None else sort), parent, depth


def _nesting(
    tid: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """nesting_parents() with its sort None when the ops are in nesting order already (most traces: no
    reordering and no reordering back), and the ops grouped by depth (_parents_by_level's levels)."""
    n = len(ts)
    sort = _nesting_sort(tid, ts, dur)
    if n == 0:
        empty = np.empty(0, dtype=np.int64)
        return sort, empty, empty, (empty, np.zeros(1, dtype=np.int64))
    t, s, d = (tid, ts, dur) if sort is None else (tid[sort], ts[sort], dur[sort])
    depth = _depths(t, s, s + d, d)
    parent, levels = _parents_by_level(t, depth)
    return sort, parent, depth, levels


def _depths(t: np.ndarray, s: np.ndarray, e: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Nesting depth of each op (sorted by thread, start, longest first): ops of its thread started before it
    minus those ended by its start. Ends are counted per thread with one sort of (thread, end) keys."""
    n = len(s)
    first = np.flatnonzero(np.append(True, t[1:] != t[:-1]))  # where each thread's ops begin
    thread = np.repeat(np.arange(len(first)), np.diff(np.append(first, n)))
    group_start = first[thread]
    started_before = np.arange(n) - group_start
    lo = int(min(s.min(), 0))
    span = int(max(e.max(), s.max())) - lo + 2
    if len(first) == 1:
        ended_by_start = np.searchsorted(np.sort(e), s, side="right")
    elif len(first) * span < 2**62:  # (thread, time) packed in one int64 key
        key_end = thread * span + (e - lo)
        ended_by_start = np.searchsorted(np.sort(key_end), thread * span + (s - lo), side="right") - group_start
    else:  # a span too long to pack: one search per thread
        ended_by_start = np.empty(n, dtype=np.int64)
        for a, b in zip(first, np.append(first[1:], n), strict=True):
            ended_by_start[a:b] = np.searchsorted(np.sort(e[a:b]), s[a:b], side="right")
    # an op with zero duration counts itself as ended; it is not its own ancestor
    ended_by_start -= (dur == 0).astype(np.int64)
    return np.maximum(started_before - ended_by_start, 0).astype(np.int64)


def _parents_by_level(t: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Parent of each op: the last op before it, in its thread, one level up. One sorted search per nesting
    level (ops of a level are in index order), not per op. Also the levels, (by_depth, edges): the ops of
    nesting level d are by_depth[edges[d]:edges[d + 1]], in order (inherit_categories walks them again)."""
    n = len(depth)
    parent = np.full(n, -1, dtype=np.int64)
    small = np.int16 if depth.max() < 2**15 else np.int64  # stable sort of small ints is a radix sort
    by_depth = np.argsort(depth.astype(small), kind="stable")
    edges = np.append(0, np.cumsum(np.bincount(depth)))
    for level in range(1, len(edges) - 1):  # a loop over nesting levels, not events
        child, above = by_depth[edges[level] : edges[level + 1]], by_depth[edges[level - 1] : edges[level]]
        if len(child) == 0 or len(above) == 0:
            continue
        pos = np.searchsorted(above, child) - 1
        cand = above[np.maximum(pos, 0)]
        ok = (pos >= 0) & (t[cand] == t[child])
        parent[child[ok]] = cand[ok]
    return parent, (by_depth, edges)


def _nesting_sort(tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray | None:
    """Indices sorting by (tid, ts, longest first); None when the input already is in that order (a timeline
    is sorted by ts and most CPU traces have one thread), which skips a costly lexsort and lets callers skip
    taking every array in that order."""
    if len(ts) > 1:
        same_tid = tid[1:] == tid[:-1]
        same_ts = same_tid & (ts[1:] == ts[:-1])
        in_order = (
            (tid[1:] >= tid[:-1]).all()
            and (~same_tid | (ts[1:] >= ts[:-1])).all()
            and (~same_ts | (dur[1:] <= dur[:-1])).all()
        )
        if in_order:
            return None
    return np.lexsort((-dur, ts, tid))


def self_times(parent: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each op's duration minus its direct children's (ordered as `parent`), never below zero."""
    has = parent >= 0
    children = np.bincount(parent[has], weights=dur[has], minlength=len(dur))  # float64, summed in index order
    return np.maximum(dur - children, 0).astype(np.int64)


def inherit_categories(
    parent: np.ndarray,
    depth: np.ndarray,
    own: np.ndarray,
    container: np.ndarray | None = None,
    levels: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(category code per op, outermost compute op mask).

    An op's category is its own if strong, else its nearest strong ancestor's; framework (weak)
    only where no strong category is found above; "other" where nothing matched at all. A
    container keeps its own category and passes down what is above it. `own` holds CATEGORIES
    codes (ordered as `parent`). An outermost compute op has a strong category of its own and no
    strong ancestor: the sequence of those is a forward's ops at one level (linear, sdpa, ...).
    `levels`: the ops grouped by depth, (by_depth, edges) from _parents_by_level, when the caller has them."""
    other = CATEGORIES.index("other")
    container = np.zeros(len(own), dtype=bool) if container is None else container
    weak_code = np.zeros(len(CATEGORIES), dtype=bool)
    weak_code[[CATEGORIES.index(w) for w in WEAK]] = True
    is_weak = weak_code[own] & ~container
    # int8 codes (14 categories): the level loop below moves a quarter of the bytes int64 would
    strong = np.where((own != other) & ~is_weak & ~container, own, -1).astype(np.int8)
    own_strong = strong >= 0
    weak_cat = np.where(is_weak, own, -1).astype(np.int8)
    for d in range(1, int(depth.max()) + 1 if len(depth) else 0):  # a loop over nesting levels, not events
        if levels is None:
            at = np.flatnonzero((depth == d) & (parent >= 0))
        else:  # the same positions, in the same (increasing) order, without a pass over every op
            at = levels[0][levels[1][d] : levels[1][d + 1]]
            at = at[parent[at] >= 0]
        p = parent[at]
        # only ops without a category of their own take their parent's
        missing = strong[at] < 0
        strong[at[missing]] = strong[p[missing]]
        missing = weak_cat[at] < 0
        weak_cat[at[missing]] = weak_cat[p[missing]]
    above = np.where(parent >= 0, strong[np.maximum(parent, 0)], -1)
    outer = own_strong & (above < 0)
    result = np.where(strong >= 0, strong, np.where(weak_cat >= 0, weak_cat, other))
    return np.where(container, own, result), outer


def host_op_categories(ops: pd.DataFrame, user_rules: tuple[Rule, ...] = ()) -> pd.DataFrame:
    """Host ops (cpu_op rows) with their self time and inherited category, in their original order:
    columns ts, dur, name, short, self_ns, category, leaf (no op nested inside it), outer (an
    outermost compute op, see inherit_categories)."""
    tid, ts, dur = (ops[c].to_numpy(dtype=np.int64) for c in ("tid", "ts", "dur"))
    columns = host_op_columns(tid, ts, dur, ops["name"], user_rules)
    return pd.DataFrame({"ts": ts, "dur": dur, "name": ops["name"].array, **columns}, index=ops.index)


def host_op_columns(
    tid: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    names: pd.Series | pd.Categorical,
    user_rules: tuple[Rule, ...] = (),
) -> dict[str, np.ndarray | pd.Categorical]:
    """host_op_categories' computed columns (short, self_ns, category, leaf, outer) as arrays, in the ops' order.
    When the ops are in nesting order already (one thread, as most CPU traces) nothing is reordered."""
    sort, parent, depth, levels = _nesting(tid, ts, dur)
    short, own = categorize(names, user_rules)
    names = names.array if isinstance(names, pd.Series) else names
    names = names if isinstance(names, pd.Categorical) else pd.Categorical(names)
    is_container = np.append([bool(CONTAINERS.search(match_text(c))) for c in names.categories], False)[names.codes]
    own_codes = np.asarray(own.codes, dtype=np.int64)
    if sort is not None:
        own_codes, is_container, dur = own_codes[sort], is_container[sort], dur[sort]
    inherited, outer = inherit_categories(parent, depth, own_codes, is_container, levels)
    self_ns = self_times(parent, dur)
    leaf = np.bincount(parent[parent >= 0], minlength=len(parent)) == 0
    if sort is not None:
        back = np.empty_like(sort)
        back[sort] = np.arange(len(sort))
        self_ns, inherited, leaf, outer = self_ns[back], inherited[back], leaf[back], outer[back]
    return {
        "short": short,
        "self_ns": self_ns,
        "category": pd.Categorical.from_codes(inherited, categories=CATEGORIES),
        "leaf": leaf,
        "outer": outer,
    }


GENERIC = ("elementwise", "other")  # kernel categories a surrounding module may refine


def enclosing_categories(
    span_tid: np.ndarray,
    span_ts: np.ndarray,
    span_dur: np.ndarray,
    span_names: pd.Series,
    point_tid: np.ndarray,
    point_ts: np.ndarray,
    user_rules: tuple[Rule, ...] = (),
) -> np.ndarray:
    """For each point (a launch call), the CATEGORIES code of the innermost categorised span that
    holds it on its thread (-1 for none): nn.Module annotations say that the `mul` kernels of an
    unfused RMSNorm are norm work, which their names cannot."""
    n_span, n_point = len(span_ts), len(point_ts)
    if n_span == 0 or n_point == 0:
        return np.full(n_point, -1, dtype=np.int64)
    _, span_cat = categorize(span_names, user_rules)
    other = CATEGORIES.index("other")
    span_own, (span_tid, span_ts, span_dur) = _categorised_spans(span_cat, (span_tid, span_ts, span_dur))
    if len(span_own) == 0:
        return np.full(n_point, -1, dtype=np.int64)
    n_span = len(span_own)
    own = np.concatenate([span_own, np.full(n_point, other, dtype=np.int64)])
    tid = np.concatenate([span_tid, point_tid]).astype(np.int64)
    ts = np.concatenate([span_ts, point_ts]).astype(np.int64)
    dur = np.concatenate([span_dur, np.zeros(n_point, dtype=np.int64)]).astype(np.int64)
    order, parent, depth = nesting_parents(tid, ts, dur)
    inherited, _ = inherit_categories(parent, depth, own[order])
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    result = inherited[back][n_span:]
    return np.where(result == other, -1, result)


def categorised_rows(names: pd.Series, rows: np.ndarray, user_rules: tuple[Rule, ...] = ()) -> np.ndarray:
    """The rows of `rows` (a mask over the events) whose name has a strong category of its own: the spans
    enclosing_categories can use (see _categorised_spans), chosen on the name column's codes before any row is
    taken (a with_stack trace has millions of python spans, a few of them categorised)."""
    column = names.array if isinstance(names.dtype, pd.CategoricalDtype) else pd.Categorical(names)
    _, category = categorize(pd.Categorical(column.categories), user_rules)
    strong = np.append(_strong_codes(np.asarray(category.codes, dtype=np.int64)), False)  # last: no name (code -1)
    return rows & strong[np.asarray(column.codes)]


def _strong_codes(codes: np.ndarray) -> np.ndarray:
    """Whether each CATEGORIES code is a strong category (not other, not weak)."""
    strong = np.ones(len(CATEGORIES), dtype=bool)
    strong[[CATEGORIES.index(w) for w in WEAK] + [CATEGORIES.index("other")]] = False
    return strong[codes]


def _categorised_spans(
    span_cat: pd.Categorical, columns: tuple[np.ndarray, ...]
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """(the CATEGORIES codes, `columns`) of the spans that have a strong category of their own (weak ones say
    nothing): only those can be a point's nearest categorised ancestor. Spans nest (a python stack per thread), so
    leaving the others out changes no containment between the rest; a with_stack trace's millions of python spans
    shrink to its categorised modules before the nesting is sorted (bench/make_big_serving_trace.py: 4.1M of
    them, one in a hundred categorised). The nesting count reads a launch that starts in the same nanosecond as a
    span (a tie) as having closed it, with or without the others; so on such ties alone the answer may differ."""
    codes = np.asarray(span_cat.codes, dtype=np.int64)
    keep = np.flatnonzero(_strong_codes(codes))
    return codes[keep], tuple(np.asarray(c)[keep] for c in columns)
