"""Colours shared by every figure, so a phase looks the same everywhere."""

PREFILL = "#7b4fbf"
DECODE_EVEN = "#2f7ebc"
DECODE_ODD = "#8cc3e8"
OTHER_STEP = "#9e9e9e"
MIXED = "#c2255c"  # decodes with a prefill chunk: between prefill purple and the warm warning colours
VERIFY = "#0ca678"  # a target forward scoring draft tokens
DRAFT = "#94d82d"  # a draft model's forward
# the other shade of each kind: neighbouring steps of one kind alternate, so a step boundary shows at any zoom
PREFILL_ODD = "#b197fc"
MIXED_ODD = "#f783ac"
VERIFY_ODD = "#63e6be"
DRAFT_ODD = "#5c940d"
OTHER_STEP_ODD = "#ced4da"
STEP_KIND = {"prefill": PREFILL, "decode": DECODE_EVEN, "mixed": MIXED, "verify": VERIFY, "draft": DRAFT}
UNKNOWN_STEP = "#f08c00"  # a step whose kind the trace does not say (issue 38): not a phase, a question
QUEUED = "#ced4da"  # a request waiting for its first step
FINISHED = "#212529"
CHOSEN = "#fab005"  # the request chosen in the requests view, and its steps on the timeline
SEQUENCES = "#1864ab"
PREFILL_TOKENS = PREFILL
GAP = "#e8590c"  # warning colour: idle GPU
KERNEL = "#2b8a3e"
COPY = "#c2255c"
HOST = "#5f3dc4"
BUSY = "#2b8a3e"
IDLE = "#e8590c"
IDLE_LEAD = "#fab005"  # idle before a step's first device work
IDLE_TAIL = "#ffc9a8"  # idle after its last
GAP_CAUSE = {"launch": "#e8590c", "sync": "#c92a2a", "other": "#f59f00"}
TRACE_A = "#1c7ed6"
TRACE_B = "#e8590c"
CATEGORY = {  # analysis.categories.CATEGORIES, the same colour on every chart
    "gemm": "#1c7ed6",
    "attention": "#7b4fbf",
    "norm": "#f59f00",
    "elementwise": "#2b8a3e",
    "rotary": "#0ca678",
    "embedding": "#845ef7",
    "kv_cache": "#d6336c",
    "sampling": "#e8590c",
    "communication": "#c92a2a",
    "moe": "#5c940d",
    "memcpy": "#868e96",
    "memset": "#adb5bd",
    "framework": "#495057",
    "other": "#ced4da",
}
LAYER_EVEN = "#4dabf7"
LAYER_ODD = "#1864ab"
