"""contracts/: the formats collectors write and parsers/analysis/app read, and the import layering."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from stepscope.contracts.markers import format_marker, parse_marker
from stepscope.contracts.run_record import RunRecord, parse_run_record, read_run_record, write_run_record
from stepscope.contracts.sweep_record import read_sweep_record, write_sweep_record
from tests.conftest import ROOT

OURS = {"contracts", "collectors", "parsers", "trace_cache", "analysis", "exporters", "batch", "app"}


def _top(module: str) -> str:
    """The folder an import names: `stepscope.parsers.x` (the installed namespace) counts as `parsers`."""
    return module.removeprefix("stepscope.").split(".")[0]


def _imports(package: str) -> dict[str, set[str]]:
    """Top-level package of every import in each module of `package` (relative imports stay inside it)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {_top(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(_top(node.module))
        found[str(path.relative_to(ROOT))] = names
    return found


def test_lower_stages_never_import_higher_ones():
    for module, names in _imports("contracts").items():
        assert not names & (OURS - {"contracts"}), module
        assert "torch" not in names, module
    # trace_cache (the parse cache) sits between parsers and analysis: parsers never import it, it imports no analysis
    for package, higher in (
        ("parsers", {"collectors", "trace_cache", "analysis", "exporters", "batch", "app"}),
        ("trace_cache", {"collectors", "analysis", "exporters", "batch", "app"}),
        ("analysis", {"collectors", "exporters", "batch", "app"}),
    ):
        for module, names in _imports(package).items():
            assert not names & higher, (module, names & higher)


def test_contracts_import_without_torch():
    # as installed (stepscope.contracts); stepscope.collectors would count as collectors
    code = (
        "import sys, stepscope.contracts.markers, stepscope.contracts.run_record, "
        "stepscope.contracts.sweep_record; "
        "print(sorted(m for m in sys.modules "
        "if m.removeprefix('stepscope.').split('.')[0] in {'torch', 'numpy', 'pandas', 'collectors'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_marker_round_trip():
    name = format_marker("decode", request=2, index=5, tokens=1, batch=4)
    assert name == "stepscope.decode[request=2,index=5,tokens=1,batch=4]"
    assert parse_marker(name) == ("decode", 2, 5, 1, 4)
    assert parse_marker(name + "x") is None
    assert parse_marker("stepscope.mixed[request=0,index=0,tokens=1,batch=1]") is None
    with pytest.raises(ValueError):
        format_marker("mixed", 0, 0, 1, 1)


def test_run_record_round_trip_keeps_unknown_keys(tmp_path):
    record = RunRecord(
        spec={"mode": "eager", "batch": 3},
        device="Synthetic GPU",
        device_type="cuda",
        model={"source": "preset:tiny-llama", "config": {"hidden_size": 64}},
        dtype="float32",
        prompt_len=12,
        trace="trace.json.gz",
        extra={"added_later": [1, 2]},
    )
    path = write_run_record(tmp_path, record)
    assert path == tmp_path / "run.json" and not list(tmp_path.glob("*.partial"))
    on_disk = json.loads(path.read_text())
    assert on_disk["schema"] == "stepscope.run/1" and on_disk["added_later"] == [1, 2] and "extra" not in on_disk
    back = read_run_record(tmp_path / "trace.json.gz")
    assert back == record
    assert (back.mode, back.batch, back.model_source, back.model_config) == (
        "eager",
        3,
        "preset:tiny-llama",
        {"hidden_size": 64},
    )


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"schema": "stepscope.sweep/1"},
        {"spec": "eager"},
        {"device": 7},
        {"prompt_len": "12"},
        {"prompt_len": True},
    ],
)
def test_run_record_rejects_what_is_not_one(tmp_path, bad):
    with pytest.raises(ValueError):
        parse_run_record(bad)
    (tmp_path / "run.json").write_text(json.dumps(bad))
    assert read_run_record(tmp_path) is None


def test_run_record_reader_tolerates_missing_and_broken_files(tmp_path):
    assert read_run_record(tmp_path / "trace.json") is None
    (tmp_path / "run.json").write_bytes(b"\xff{not json")
    assert read_run_record(tmp_path) is None
    (tmp_path / "run.json").write_text(json.dumps({"device": "x"}))  # no schema: an older or hand-written record
    assert read_run_record(tmp_path).device == "x"


def test_shipped_samples_read_as_run_records():
    for folder in sorted((ROOT / "sample_traces").iterdir()):
        if folder.is_dir():
            record = read_run_record(folder)
            assert record is not None and record.device_type == "cpu" and record.model_config, folder
            assert record.to_dict() == json.loads((folder / "run.json").read_text())


def test_sweep_record_checks_and_writes(tmp_path):
    record = {
        "schema": "stepscope.sweep/1",
        "points": [{"prompt_tokens": 16, "measured_ms": 1.0}],
        "decode_step": {},
        "marks": {},
    }
    write_sweep_record(tmp_path, record)
    assert read_sweep_record(tmp_path) == record
    with pytest.raises(ValueError, match="not a Stepscope sweep"):
        write_sweep_record(tmp_path, {"schema": "stepscope.run/1"})
    with pytest.raises(ValueError, match="points"):
        write_sweep_record(tmp_path, {**record, "points": [{"measured_ms": 1.0}]})
    with pytest.raises(ValueError, match="cannot read"):
        read_sweep_record(tmp_path / "missing")
