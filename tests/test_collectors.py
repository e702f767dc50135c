"""End-to-end tests of the collectors on the CPU: real profiled generations of tiny presets."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from stepscope.collectors.errors import CollectorError
from stepscope.collectors.prompts import BYTE_ID_OFFSET, byte_level_ids, counted_ids
from stepscope.collectors.run import RunSpec, run_profiled_generation
from stepscope.contracts.markers import parse_marker

REPO = Path(__file__).resolve().parents[1]
RUN_KEYS = {"schema", "spec", "versions", "device", "model", "dtype", "timings", "trace", "created"}


def run_folders(out: Path) -> list[Path]:
    """Visible entries only: the device lock file is hidden and stays."""
    return sorted(p for p in out.iterdir() if not p.name.startswith(".")) if out.exists() else []


def hidden_partials(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if p.name.startswith(".partial")] if out.exists() else []


def trace_markers(run_dir: Path):
    with gzip.open(run_dir / "trace.json.gz", "rt", encoding="utf-8") as f:
        trace = json.load(f)
    names = [e.get("name", "") for e in trace["traceEvents"] if e.get("ph") == "X"]
    return [m for m in map(parse_marker, names) if m is not None]


def test_default_preset_eager_end_to_end(tmp_path):
    stages = []
    spec = RunSpec(device="cpu", prompt_tokens=8, new_tokens=4, record_shapes=True)
    run_dir = run_profiled_generation(spec, tmp_path, progress=lambda *a: stages.append(a))

    assert run_folders(tmp_path) == [run_dir]
    assert not hidden_partials(tmp_path)
    assert {s[0] for s in stages} == {"load model", "warm up", "profile", "export"}

    markers = trace_markers(run_dir)
    # 4 new tokens take 4 forwards: the prefill gives the first token, 3 decodes the rest.
    assert [(m.kind, m.index, m.tokens) for m in markers] == [
        ("prefill", 0, 8),
        ("decode", 1, 1),
        ("decode", 2, 1),
        ("decode", 3, 1),
    ]
    assert all(m.request == 0 and m.batch == 1 for m in markers)

    record = json.loads((run_dir / "run.json").read_text())
    assert record.keys() >= RUN_KEYS
    assert record["schema"] == "stepscope.run/1"
    assert record["trace"] == "trace.json.gz"
    assert record["dtype"] == "float32"
    assert record["versions"]["cuda"] is None or isinstance(record["versions"]["cuda"], str)
    assert record["model"]["config"]["hidden_size"] == 256
    assert record["spec"]["preset"] == "tiny-llama"
    timings = record["timings"]
    assert len(timings["token_times_ms"]) == 4
    assert len(timings["itl_ms"]) == 3
    assert timings["ttft_ms"] == timings["token_times_ms"][0] > 0
    assert timings["profiled_decode_steps"] == 3 and timings["profile_capped"] is False
    assert record["markers"] == {"prefill": 1, "decode": 3}


def test_several_requests_with_decode_step_cap(tmp_path):
    spec = RunSpec(
        preset="tiny-qwen2",
        device="cpu",
        prompt_tokens=5,
        new_tokens=6,
        requests=2,
        max_profiled_decode_steps=2,
        warmup=0,
    )
    run_dir = run_profiled_generation(spec, tmp_path)
    markers = trace_markers(run_dir)
    assert [(m.request, m.index) for m in markers] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    timings = json.loads((run_dir / "run.json").read_text())["timings"]
    assert timings["profile_capped"] is True and timings["profiled_decode_steps"] == 2
    # Timings still cover every generated token, not only the profiled ones.
    assert len(timings["token_times_ms"]) == 12 and len(timings["itl_ms"]) == 10
    assert [len(r["token_times_ms"]) for r in timings["per_request"]] == [6, 6]


def test_text_prompt_batch_on_phi3(tmp_path):
    spec = RunSpec(preset="tiny-phi3", device="cpu", prompt="héllo", new_tokens=2, batch=2, warmup=0)
    run_dir = run_profiled_generation(spec, tmp_path)
    markers = trace_markers(run_dir)
    assert [(m.kind, m.tokens, m.batch) for m in markers] == [("prefill", 6, 2), ("decode", 1, 2)]


def test_compile_mode_on_cpu(tmp_path):
    """torch.compile with inductor's C++ backend: the slowest test (~25 s on 2 cores), kept tiny."""
    spec = RunSpec(preset="tiny-qwen2", device="cpu", mode="compile", prompt_tokens=4, new_tokens=3, warmup=0)
    run_dir = run_profiled_generation(spec, tmp_path)
    assert [(m.kind, m.index) for m in trace_markers(run_dir)] == [
        ("prefill", 0),
        ("decode", 1),
        ("decode", 2),
    ]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["spec"]["mode"] == "compile"
    assert len(record["timings"]["token_times_ms"]) == 3


@pytest.mark.parametrize(
    "spec, message",
    [
        (RunSpec(preset="no-such-preset", device="cpu"), "unknown preset"),
        (RunSpec(device="cpu", mode="cuda-graph"), "cuda-graph needs a CUDA GPU"),
        (RunSpec(model="/no/such/model/folder", device="cpu"), "no model folder"),
        (RunSpec(device="cpu", new_tokens=0), "new-tokens must be at least 1"),
    ],
)
def test_errors_leave_nothing_behind(tmp_path, spec, message):
    with pytest.raises(CollectorError, match=message):
        run_profiled_generation(spec, tmp_path)
    assert run_folders(tmp_path) == [] and not hidden_partials(tmp_path)


def test_missing_cuda_is_a_clear_error(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(CollectorError, match="CUDA is not available"):
        run_profiled_generation(RunSpec(device="cuda"), tmp_path)
    assert run_folders(tmp_path) == []


def test_model_that_does_not_fit_is_refused_before_allocating(tmp_path, monkeypatch):
    import stepscope.collectors.model_loading as model_loading

    monkeypatch.setattr(model_loading, "free_memory_bytes", lambda device: 1 << 30)
    with pytest.raises(CollectorError, match="does not fit"):
        run_profiled_generation(RunSpec(preset="llama-3-8b", device="cpu"), tmp_path)
    assert run_folders(tmp_path) == [] and not hidden_partials(tmp_path)


def test_local_model_folder_and_remote_code_permission(tmp_path):
    import torch

    from stepscope.collectors.model_loading import build_preset

    folder = tmp_path / "model"
    build_preset("tiny-qwen2", torch.device("cpu"), torch.float32, 1, 16).model.save_pretrained(folder)
    out = tmp_path / "runs"
    run_dir = run_profiled_generation(RunSpec(model=str(folder), device="cpu", new_tokens=2, warmup=0), out)
    assert json.loads((run_dir / "run.json").read_text())["model"]["source"] == f"local:{folder}"

    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "config.json").write_text(
        json.dumps({"model_type": "stepscope_custom", "auto_map": {"AutoConfig": "configuration_x.XConfig"}})
    )
    with pytest.raises(CollectorError, match="trust-remote-code"):
        run_profiled_generation(RunSpec(model=str(custom), device="cpu"), out)
    assert run_folders(out) == [run_dir]


def test_second_run_on_a_device_waits_and_says_why(tmp_path):
    import torch

    from stepscope.collectors.locking import device_lock

    messages = []
    released = threading.Event()

    def hold_then_release():
        time.sleep(0.5)
        released.set()

    with device_lock(tmp_path, torch.device("cpu"), messages.append):
        waiter_messages = []
        waiter = threading.Thread(
            target=lambda: device_lock(tmp_path, torch.device("cpu"), waiter_messages.append).__enter__()
        )
        waiter.start()
        hold_then_release()
        assert waiter.is_alive()  # blocked on the lock we hold
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert messages == []
    assert waiter_messages == ["waiting for another run on cpu to finish"]


def test_prompt_ids_are_deterministic_and_in_vocab():
    assert byte_level_ids("A", 32000) == [BYTE_ID_OFFSET + 65]
    # every 37th byte id from the offset, by hand: 0, 37, 74, 111, 148
    assert counted_ids(5, 32000) == [BYTE_ID_OFFSET + k for k in (0, 37, 74, 111, 148)]
    assert all(0 <= i < 100 for i in counted_ids(300, 100))


def test_cli_errors_are_one_line_and_exit_2(tmp_path):
    for args in (["--preset", "no-such-preset", "--device", "cpu"], ["--batch", "x"]):
        proc = subprocess.run(
            [sys.executable, "-m", "collectors.run", *args, "--out", str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr


def test_static_cache_loop_decodes_like_hf_generate():
    """The decode step the cuda-graph mode captures, run eagerly on the CPU, gives HF's greedy tokens."""
    import torch

    from stepscope.collectors.decode_loops import DecodeSettings, StaticCacheLoop
    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.prompts import prompt_ids

    cpu = torch.device("cpu")
    model = build_preset("tiny-llama", cpu, torch.float32, 2, 32).model
    ids = prompt_ids("static shapes", 0, 2, 32000, None)
    new_tokens = 6
    expected = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        pad_token_id=0,
    )[:, ids.shape[1] :]
    loop = StaticCacheLoop(model, DecodeSettings(new_tokens, 2, ids.shape[1]), cpu, "compile")
    tokens = []
    with torch.inference_mode():
        loop._prefill(ids)
        tokens.append(loop.token.clone())
        for _ in range(new_tokens - 1):
            loop._decode_step(model)
            tokens.append(loop.token.clone())
    assert torch.equal(torch.cat(tokens, dim=1), expected)


def test_hf_compiled_call_is_marked_from_outside():
    """HF's GPU compile path, forced onto the CPU with dynamo's eager backend (cheap)."""
    import torch

    from stepscope.collectors.decode_loops import DecodeSettings, HFGenerateLoop
    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.prompts import prompt_ids
    from stepscope.collectors.step_tracker import StepTracker

    cpu = torch.device("cpu")
    model = build_preset("tiny-qwen2", cpu, torch.float32, 1, 16).model
    ids = prompt_ids(None, 4, 1, 8192, None)
    loop = HFGenerateLoop(model, DecodeSettings(4, 1, 4), hf_compile=True)
    compile_config = loop.generation_config.compile_config
    if not hasattr(compile_config, "_compile_all_devices"):
        pytest.skip("this transformers cannot compile generate() on a CPU")
    compile_config._compile_all_devices = True
    compile_config.backend = "eager"
    warm_tracker = StepTracker(1, cpu)
    warm_tracker.start_request(0)
    loop.generate(ids, warm_tracker)  # compiles
    with torch.profiler.profile() as prof:
        tracker = StepTracker(1, cpu)
        tracker.start_request(0)
        loop.generate(ids, tracker)
    names = [e.name for e in prof.events()]
    markers = [m for m in map(parse_marker, names) if m is not None]
    assert [(m.kind, m.index) for m in markers] == [
        ("prefill", 0),
        ("decode", 1),
        ("decode", 2),
        ("decode", 3),
    ]
    assert hasattr(model, "_compiled_call")  # the decodes really went through HF's compiled call
    assert len(tracker.token_times_ms[0]) == 4


def test_the_compile_warm_up_says_it_is_compiling():
    """The compile run's first warm-up stands at 0 for tens of seconds on a CPU: the bar says why; others do not."""
    from stepscope.collectors.run import stage_hint

    assert "compil" in stage_hint("compile", "warm up", 0)
    assert stage_hint("compile", "warm up", 1) == ""
    assert stage_hint("eager", "warm up", 0) == ""
    assert stage_hint("compile", "profile", 0) == ""
