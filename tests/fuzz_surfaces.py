"""SYNTHETIC hostile inputs for the surfaces of issue 26 (tests/test_fuzz.py, bench/fuzz.py): rank folders, --logdir
names, cache entries, sidecars that are not files, user regexes.

Each `check_*` builds its input in a temporary folder, runs the command line in-process (as tests/fuzz_inputs.py's
check_contract does) under a 20 s alarm, and asserts the issue's bar: exit 0 with a sane answer, or exit 2 with one
`error:` line that is not an internal error or out of memory. Where the input should not change the answer (a
damaged cache entry, a sidecar that is not a file) the answer is compared with the one for a clean input.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from stepscope.app.cli.main import INTERNAL_ERROR
from stepscope.app.cli.main import main as cli_main
from stepscope.trace_cache.results import RESULT_TAG as _RESULT_TAG
from tests import fuzz_inputs as fi
from tests.synthetic_traces import annotation, doc, kernel, launch, synthetic_generation

WALL_S = 20
BAD_WORDS = (INTERNAL_ERROR, "internal error", "out of memory")
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


class TooSlowError(AssertionError):
    """An input took longer than the issue's 20 s."""


@contextlib.contextmanager
def _alarm(seconds: int):
    def ring(*_):
        raise TooSlowError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str], cache_dir: Path | None = None) -> tuple[int, str, str]:
    """(status, stdout, stderr) of the command line run in-process, with its own cache folder and a 20 s alarm."""
    out, err = io.StringIO(), io.StringIO()
    saved = os.environ.get("STEPSCOPE_CACHE_DIR")
    if cache_dir is not None:
        os.environ["STEPSCOPE_CACHE_DIR"] = str(cache_dir)
    try:
        with _alarm(WALL_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli_main(argv)
    finally:
        if cache_dir is not None:
            if saved is None:
                os.environ.pop("STEPSCOPE_CACHE_DIR", None)
            else:
                os.environ["STEPSCOPE_CACHE_DIR"] = saved
    return status, out.getvalue(), err.getvalue()


def assert_outcome(status: int, out: str, err: str) -> None:
    """The bar: exit 0 and no error line, or exit 2, nothing on stdout and one error line that is a user error."""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    for word in BAD_WORDS:
        assert word not in err, err[-1000:]
    out.encode("utf-8")  # a terminal's stdout is strict UTF-8: a lone surrogate would fail the write
    if status == 2:
        assert len(errors) == 1 and out == "", err[-1000:]
    else:
        assert status == 0 and not errors, (status, err[-1000:])


def _plant(path: Path, kind: str) -> None:
    """Something that is not a regular file at `path`: a FIFO, a folder, a link to /dev/zero or a dangling one."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "loop":
        path.symlink_to(path.name)
    else:
        path.symlink_to(path.parent / "missing-target")


NOT_FILES = st.sampled_from(["fifo", "folder", "dev-zero", "loop", "dangling"])


# --- rank folders


def _rank_doc(rank: int, steps: int, info) -> dict:
    events, corr = [], 1
    for i in range(steps):
        base = 10_000.0 + i * 1000.0 + rank
        kind = "prefill" if i == 0 else "decode"
        events.append(
            annotation(f"stepscope.{kind}[request=0,index={i},tokens={16 if i == 0 else 1},batch=1]", base, 400)
        )
        events += [launch(base + 1, 0.5, corr), kernel("gemm", base + 2, 50.0, corr)]
        events += [launch(base + 2, 0.5, corr + 1), kernel("ncclDevKernel_AllReduce", base + 60, 20.0, corr + 1)]
        corr += 2
    document = doc(events)
    if info is not None:
        document["distributedInfo"] = info
    return document


RANK_NAMES = st.sampled_from(
    ["rank-{r}.json", "rank_{r}.json.gz", "x-TP-{r}-DP-0-PP-0-EP-0.json", "worker{r}.json", "rank-0.json", "{r}.json"]
)
DIST_INFO = st.one_of(
    st.none(),
    st.fixed_dictionaries({"rank": fi.ints, "world_size": fi.ints}),
    st.fixed_dictionaries({"rank": st.sampled_from([0, 0, 1, -1, "0", None, 2**70]), "world_size": fi.ints}),
    st.sampled_from(["rank", [], 5]),
)


@st.composite
def rank_folders(draw) -> tuple[list[tuple[str, bytes | str]], bool]:
    """((file name, bytes, or a NOT_FILES kind) of 1-5 rank members, whether every member is a whole, valid trace).
    Sometimes mutated, sometimes with repeated or hostile ranks."""
    members: list[tuple[str, bytes | str]] = []
    whole = True
    for r in range(draw(st.integers(1, 5))):
        name = draw(RANK_NAMES).format(r=draw(st.sampled_from([r, r, 0, 10**7, 2**40])))
        if any(name == m[0] for m in members):
            name = f"{r}-{name}"
        if draw(st.integers(0, 9)) == 0:
            members.append((name, draw(NOT_FILES)))
            continue
        steps = draw(st.sampled_from([3, 4, 4, 4, 2, 1, 0]))
        whole = whole and steps > 0  # a trace with no events is an error of its own
        data = json.dumps(_rank_doc(r, steps, draw(DIST_INFO))).encode()
        if draw(st.integers(0, 5)) == 0:  # mostly whole traces, so the ranks are compared step by step
            mutated = draw(fi.mutated(data))
            whole = whole and mutated == data
            data = mutated
        members.append((name, gzip.compress(data) if name.endswith(".gz") else data))
    return members, whole


def check_rank_folder(drawn: tuple[list[tuple[str, bytes | str]], bool]) -> int:
    """The folder's answer; when every file in it is a whole, valid trace (whatever its ranks say: repeated,
    negative, huge, missing), that answer is exit 0 with warnings, as README promises, never an error."""
    members, whole = drawn
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-ranks-") as tmp:
        folder = Path(tmp) / "run"
        folder.mkdir()
        for name, content in members:
            if isinstance(content, bytes):
                (folder / name).write_bytes(content)
            else:
                _plant(folder / name, content)
        status, out, err = run_cli(["analyze", str(folder), "--json"], Path(tmp) / "cache")
        assert_outcome(status, out, err)
        if whole and any(isinstance(content, bytes) for _, content in members):
            assert status == 0, err[-500:]
        if status == 0:
            report = json.loads(out, parse_constant=fi._reject_constant)
            ranks = report.get("ranks")
            if ranks is None:  # one trace in the folder: the single-trace answer
                fi.assert_sane_report(report)
            else:
                for rank in ranks:
                    fi.assert_sane_report(rank)
                numbers = [r["rank"] for r in ranks]
                assert len(numbers) == len(set(numbers)), numbers  # one row per rank, never a rank twice
        text = run_cli(["analyze", str(folder)], Path(tmp) / "cache")
        assert_outcome(*text)
        assert text[0] == status
    return status


# --- --logdir names

NAME_BYTES = st.one_of(
    st.binary(min_size=1, max_size=12).map(lambda b: bytes(c for c in b if c not in (0, 47)) or b"x"),
    st.sampled_from([b"\xff", b"\xfe\xfe", b"\xed\xa0\x80", b"a\\xb", b"*_`[x](y)", b"<img src=x>", b"."]),
    st.sampled_from([c.encode() for c in BIDI]).map(lambda b: b"name" + b),
)


@st.composite
def logdir_trees(draw) -> list[tuple[bytes, bytes]]:
    """(relative path as bytes, content) of up to 8 files in up to 3 levels of folders with hostile names."""
    trace = json.dumps(doc(synthetic_generation(decode_steps=2))).encode()
    contents = st.sampled_from([trace, gzip.compress(trace), b'{"loss": 1}', b"", b"SQLite format 3\x00" + bytes(8)])
    files = []
    for _ in range(draw(st.integers(1, 8))):
        parts = draw(st.lists(NAME_BYTES, min_size=0, max_size=2))
        name = draw(NAME_BYTES) + draw(st.sampled_from([b".json", b".json.gz", b".pftrace", b".sqlite", b""]))
        files.append((b"/".join([*parts, name]), draw(contents)))
    return files


def check_logdir_tree(files: list[tuple[bytes, bytes]]) -> int:
    """Listing, folders and keys of a hostile tree: keys valid UTF-8 that round-trip, names shown without raw bidi
    controls or surrogates, every listed trace opens as a source and analyses (or fails in one line). 0."""
    from stepscope.app.logdir import (
        SniffCache,
        entry_key,
        list_folders,
        rel_of_key,
        resolve_within,
        scan_traces,
        shown_name,
    )
    from stepscope.app.logdir_panel import open_trace, opened_sources

    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-logdir-") as tmp:
        root = Path(tmp) / "logs"
        root.mkdir()
        for rel, content in files:
            path = os.fsencode(root) + b"/" + rel
            with contextlib.suppress(OSError):  # a name that clashes with a folder of the same tree
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as handle:
                    handle.write(content)
        with _alarm(WALL_S):
            folders = list_folders(root)
            listing = scan_traces(root, sniffs=SniffCache())
        for rel in folders:
            shown = shown_name(rel)
            shown.encode("utf-8")
            assert not any(c in shown for c in BIDI)
            assert rel_of_key(entry_key(rel)) == rel
            scan_traces(root, rel, sniffs=SniffCache())
        for trace in listing.traces[:3]:
            trace.key.encode("utf-8")
            assert rel_of_key(trace.key) == trace.rel_path
            assert not any(c in trace.shown for c in BIDI)
            state: dict = {}
            open_trace(state, trace.rel_path, root.resolve())
            (source,) = opened_sources(state, root.resolve())
            source.key.encode("utf-8")
            source.label.encode("utf-8")
            path = resolve_within(root.resolve(), trace.rel_path)
            assert_outcome(*run_cli(["analyze", os.fsdecode(path)], Path(tmp) / "cache"))
        return 0


# --- cache entries

JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), fi.ints, st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20,
)
SMALL_TRACE = json.dumps(doc(synthetic_generation(decode_steps=3))).encode()


@st.composite
def cache_damage(draw) -> tuple[str, str, object]:
    """(which entry: stat | results | timelines, how, what with): the damage done to one cache entry."""
    kind = draw(st.sampled_from(["stat", "results", "timelines"]))
    hows = ["bytes", "not-a-file", "truncate", "flip", "forged-result", "empty", "meta", "meta-field", "foreign"]
    how = draw(st.sampled_from(hows))
    if how == "bytes":
        return kind, how, draw(st.binary(max_size=200))
    if how == "not-a-file":
        return kind, how, draw(NOT_FILES)
    if how in ("truncate", "flip"):
        return kind, how, draw(st.integers(0, 10**6))
    if how == "forged-result":  # a valid tag and checksum over a hostile body
        body = draw(st.one_of(JSON_VALUES.map(json.dumps), st.just("[" * 3000 + "]" * 3000), st.text(max_size=40)))
        return kind, how, body
    if how == "meta":  # for a Timeline entry: a valid Arrow file whose metadata JSON is hostile
        return kind, how, draw(st.one_of(JSON_VALUES.map(json.dumps), st.just("[" * 5000 + "]" * 5000)))
    if how == "meta-field":  # a Timeline entry's own metadata, bound to its name, one field of another shape
        return kind, how, (draw(st.sampled_from(META_FIELDS)), draw(JSON_VALUES))
    return kind, how, None  # "foreign": another trace's entry of the same kind written over this one's


# The fields of a Timeline entry's stored meta (trace_cache/column_file.py META_SHAPE), and of its metadata.
META_FIELDS = (
    "meta.source_format",
    "meta.event_count",
    "meta.devices",
    "meta.device_keys",
    "meta.thread_names",
    "meta.unknown_categories",
    "meta.warnings",
    "meta.extra",
    "columns",
    "memory_rows",
)
OTHER_TRACE = json.dumps(doc(synthetic_generation(decode_steps=5, kernels_per_step=4))).encode()


def _damage(entry: Path, how: str, what) -> None:
    from stepscope.trace_cache.keys import hash_text

    raw = entry.read_bytes() if entry.is_file() else b""
    entry.unlink()
    if how == "not-a-file":
        _plant(entry, what)
        return
    if how == "bytes":
        data = what
    elif how == "truncate":
        data = raw[: what % (len(raw) + 1)]
    elif how == "flip":
        data = bytearray(raw)
        if data:
            data[what % len(data)] ^= 0xFF
        data = bytes(data)
    elif how == "forged-result":  # whoever can write the cache can name the entry too: the body is judged
        header = {"tag": _RESULT_TAG, "entry": entry.name, "sum": hash_text(what), "notes": []}
        data = (json.dumps(header) + "\n" + what).encode()
    elif how == "meta" and raw[:6] == b"ARROW1":
        data = _with_metadata(raw, what)
    elif how == "meta-field" and raw[:6] == b"ARROW1":
        data = _with_metadata(raw, json.dumps(_with_field(_metadata_of(raw), *what)))
    elif how == "foreign":
        data = what
    else:
        data = b""
    entry.write_bytes(data)


def _metadata_of(raw: bytes) -> dict:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from stepscope.trace_cache.entry_seal import SEAL_BYTES

    table = ipc.open_file(pa.py_buffer(raw[:-SEAL_BYTES])).read_all()
    return json.loads(table.schema.metadata[b"stepscope"])


def _with_field(metadata: dict, field: str, value: object) -> dict:
    """The metadata with one field (a dotted path) set to `value`."""
    *parents, last = field.split(".")
    inner = metadata
    for name in parents:
        inner = inner[name]
    inner[last] = value
    return metadata


def _with_metadata(raw: bytes, meta: str) -> bytes:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from stepscope.trace_cache.entry_seal import SEAL_BYTES, SEAL_MAGIC, sealed

    content = raw[:-SEAL_BYTES] if raw.endswith(SEAL_MAGIC) else raw
    table = ipc.open_file(pa.py_buffer(content)).read_all()
    table = table.replace_schema_metadata({b"stepscope": meta.encode("utf-8", "surrogatepass")})
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sealed(sink.getvalue().to_pybytes())  # whoever can write the cache can seal too: the metadata is judged


def check_cache_damage(damage: tuple[str, str, object]) -> int:
    """A damaged entry never changes the answer: text and --json after the damage equal the clean answers."""
    kind, how, what = damage
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-cache-") as tmp:
        trace = Path(tmp) / "trace.json"
        trace.write_bytes(SMALL_TRACE)
        cache = Path(tmp) / "cache"
        runs = (["analyze", str(trace), "--json"], ["analyze", str(trace)])
        other = ["analyze", str(trace), "--json", "--gap-threshold-us", "2"]  # no result cached: the Timeline is read
        clean = [run_cli(argv, cache) for argv in runs]
        clean_other = run_cli(other, Path(tmp) / "other-cache")
        assert all(c[0] == 0 for c in [*clean, clean_other]), clean[0][2]
        if how == "foreign":  # another trace's entry of this kind, from a cache of its own
            foreign = Path(tmp) / "foreign.json"
            foreign.write_bytes(OTHER_TRACE)
            assert run_cli(["analyze", str(foreign), "--json"], Path(tmp) / "foreign")[0] == 0
            what = next(e for e in sorted((Path(tmp) / "foreign" / kind).iterdir()) if e.name[0] != ".").read_bytes()
        for entry in sorted((cache / kind).iterdir()) if (cache / kind).is_dir() else []:
            if not entry.name.startswith("."):
                _damage(entry, how, what)
        for argv, expected in ((runs[0], clean[0]), (runs[1], clean[1]), (other, clean_other)):
            status, out, err = run_cli(argv, cache)
            assert_outcome(status, out, err)
            assert status == 0 and out == expected[1], (kind, how, err[-500:])
        return 0


# --- thousands of distinct long names (issue 39, item 4)


@st.composite
def long_name_traces(draw) -> tuple[int, int, int, str]:
    """(kernels, name length, kernels per forward, filler): a gzip'd generation whose every kernel has a distinct
    name of that length (tests/synthetic_long_names.py), the filler drawn to stress the name passes (brackets
    nested or unbalanced, words the patterns look for, text the short name keeps)."""
    per_step = draw(st.integers(5, 100))
    kernels = per_step * draw(st.integers(2, 3000 // per_step))  # two forwards at least: one is not a generation
    length = draw(st.sampled_from([1, 64, 1023, 1024, 1025, 4000, 8192, 16384]))
    filler = draw(
        st.one_of(
            st.just(""),
            st.text(alphabet="<>()[]:, abxyzFlashGemmcudaMemcpy$vllm/", min_size=1, max_size=40),
            st.sampled_from(["<" * 20, ">" * 20, "(" * 10 + "x", "Synchronize ", "vllm/", "cudaMemcpy"]),
        )
    )
    return kernels, length, per_step, filler


def check_long_names(drawn: tuple[int, int, int, str]) -> int:
    """analyze --json of the trace answers within the alarm (or is refused in one line); an answer holds its
    forwards, each with its kernels."""
    from tests.synthetic_long_names import synthetic_long_names_gz

    kernels, length, per_step, filler = drawn
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-names-") as tmp:
        path = Path(tmp) / "trace.json.gz"
        path.write_bytes(synthetic_long_names_gz(kernels, length, per_step, filler))
        status, out, err = run_cli(["analyze", str(path), "--json"], Path(tmp) / "cache")
        assert_outcome(status, out, err)
        if status == 0:
            steps = json.loads(out)["steps"]
            assert len(steps) == kernels // per_step and all(s["kernels"] == per_step for s in steps), err
        return status


# --- sidecars that are not files (or are too large, or too deep)


@st.composite
def sidecars(draw) -> tuple[str, object]:
    kind = draw(st.sampled_from(["not-a-file", "huge", "deep", "binary", "empty", "json"]))
    if kind == "not-a-file":
        return kind, draw(NOT_FILES)
    if kind == "deep":
        return kind, draw(st.integers(100, 100_000))
    if kind == "binary":
        return kind, draw(st.binary(max_size=300))
    if kind == "json":
        return kind, json.dumps(draw(JSON_VALUES))
    return kind, None


def check_sidecar(sidecar: tuple[str, object]) -> int:
    """A run.json beside a valid trace that is not a usable file: the answer is the one with no run.json."""
    kind, what = sidecar
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-sidecar-") as tmp:
        trace = Path(tmp) / "trace.json"
        trace.write_bytes(SMALL_TRACE)
        absent = run_cli(["analyze", str(trace), "--json", "--no-cache"])
        run_json = Path(tmp) / "run.json"
        if kind == "not-a-file":
            _plant(run_json, what)
        elif kind == "huge":
            run_json.write_bytes(b'{"device": "' + b"x" * (5 << 20) + b'"}')
        elif kind == "deep":
            run_json.write_text('{"model": ' + "[" * what + "]" * what + "}")
        elif kind == "binary":
            run_json.write_bytes(what)
        elif kind == "json":
            run_json.write_text(what)
        else:
            run_json.write_bytes(b"")
        for extra in (["--no-cache"], [], []):  # without the cache, cold, then the cached answer
            status, out, err = run_cli(["analyze", str(trace), "--json", *extra], Path(tmp) / "cache")
            assert_outcome(status, out, err)
            assert status == 0, err[-500:]
            if kind != "json":  # an object may be a valid run record: a different (richer) answer is right
                assert out == absent[1], (kind, err[-500:])
        return 0


# --- user regexes

REGEX_ATOMS = st.sampled_from(
    [
        *("a", "a+", "(a+)+", "(a|a)*", "(a*)*", ".*", r"\d+", r"\w", "[a-z]", "(?P<kind>prefill|decode)"),
        *(r"(?P<tokens>\d+)", r"\1", "(?=a)", "(?!b)", "(?<=x)", "(?<!y)", "(?P=kind)", "{1000}", "{99999}"),
        *("(", ")", "[", "*", "\\", "$", "^", "(?i)", "(?x)", r"\b", r"\Z", "\udcff", "é", "\u202e", "{2,}"),
        *("a{0,65535}", "(?#c)", "|"),
    ]
)


# patterns that take a backtracking engine exponential time on a name that almost matches (ALMOST below)
EVIL = st.sampled_from(["^(a+)+$", "(a|a)*$", "(a*)*b", "^(a|aa)+$", "(.*a){20}!x", "^(\\w+\\s?)*$", "(a+)+!b"])


@st.composite
def user_regexes(draw) -> str:
    atoms = "".join(draw(st.lists(REGEX_ATOMS, min_size=1, max_size=8)))
    return draw(st.sampled_from([atoms, atoms, draw(EVIL), draw(EVIL) + atoms, atoms + draw(EVIL)]))


ALMOST = "a" * 35 + "!"
REGEX_TRACE = json.dumps(
    doc(
        synthetic_generation(decode_steps=3)
        + [annotation(ALMOST, 1000.0 + 150 * i, 40.0) for i in range(4)]
        + [annotation("my_step_decode_1", 1300.0, 40.0), launch(2000.0, 1.0, 990), kernel(ALMOST, 2001.0, 3.0, 990)]
    )
).encode()


def check_user_regex(pattern: str) -> int:
    """The pattern as --step-regex and as a categories rule: an answer or one error line, within 20 s."""
    with tempfile.TemporaryDirectory(prefix="stepscope-fuzz-regex-") as tmp:
        trace = Path(tmp) / "trace.json"
        trace.write_bytes(REGEX_TRACE)
        status, out, err = run_cli(["analyze", str(trace), "--json", "--step-regex", pattern], Path(tmp) / "c")
        assert_outcome(status, out, err)
        if status == 0:
            fi.assert_sane_report(json.loads(out, parse_constant=fi._reject_constant))
        rules = Path(tmp) / "rules.toml"
        rules.write_text(f"gemm = [{json.dumps(pattern)}]\n", encoding="utf-8", errors="surrogatepass")
        second = run_cli(["analyze", str(trace), "--json", "--categories", str(rules)], Path(tmp) / "c")
        assert_outcome(*second)
        return status
