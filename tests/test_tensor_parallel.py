"""The 2-rank CPU tensor-parallel collector: the split is exact; a capture has every all-reduce in each trace."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")

from stepscope.collectors.tensor_parallel import TPSpec, _free_port, run_tensor_parallel, shard_model  # noqa: E402
from stepscope.parsers.ranks import load_ranks  # noqa: E402


def _sharded_logits(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.prompts import prompt_ids

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        model = build_preset("tiny-llama", torch.device("cpu"), torch.float32, 1, 64).model
        shard_model(model, rank, 2)
        with torch.no_grad():
            logits = model(prompt_ids(None, 16, 1, model.config.vocab_size, None)).logits
        torch.save(logits, os.path.join(out, f"logits-{rank}.pt"))  # our own file, written by this test
    finally:
        dist.destroy_process_group()


def test_column_row_split_matches_the_unsharded_model(tmp_path):
    import torch.multiprocessing as mp

    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.prompts import prompt_ids

    mp.start_processes(_sharded_logits, args=(_free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    model = build_preset("tiny-llama", torch.device("cpu"), torch.float32, 1, 64).model
    with torch.no_grad():
        reference = model(prompt_ids(None, 16, 1, model.config.vocab_size, None)).logits
    for rank in (0, 1):
        logits = torch.load(tmp_path / f"logits-{rank}.pt", weights_only=True)
        assert torch.allclose(logits, reference, atol=1e-4, rtol=1e-4)


def test_two_rank_capture_has_every_all_reduce(tmp_path):
    run_dir = run_tensor_parallel(TPSpec(new_tokens=3, warmup=0), tmp_path)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["tensor_parallel"]["world_size"] == 2 and record["markers"] == {"prefill": 1, "decode": 2}
    layers = record["model"]["config"]["num_hidden_layers"]
    ranked = load_ranks(run_dir)
    assert [f.rank for f in ranked.files] == [0, 1] and ranked.same_clock
    for t in ranked.timelines:
        names = t.events["name"].astype(str)
        assert (names == "c10d::allreduce_").sum() == 2 * layers * 3  # o_proj and down_proj, 3 forwards
        assert names.str.startswith("stepscope.").sum() == 3
    assert not list(tmp_path.glob(".partial-*"))
