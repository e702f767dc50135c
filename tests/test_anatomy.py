"""Inside a step: short names, categories, host self time, layers, per-category roofline, compare.

Real traces: ../shared/real_traces (AMD-AGI/TraceLens, MIT; see PROVENANCE.md there) and the
project's own captures in sample_traces/. Layer ground truth is written next to each case.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis import analyze
from stepscope.analysis.anatomy import anatomy
from stepscope.analysis.anatomy_compare import anatomy_phrase, compare_anatomy
from stepscope.analysis.categories import BUILTIN, CATEGORIES, categorize, host_op_categories, load_rules, matching_rule
from stepscope.analysis.kernel_names import MAX_CHARS, short_name, short_names
from stepscope.analysis.roofline.hardware import Hardware
from stepscope.analysis.roofline.model_config import shape_from_config
from stepscope.parsers import load_trace
from tests.conftest import real_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
GPU_LLM_TRACES = (
    "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
    "tracelens_sglang_qwen3-8b_decode_mi300x.json.gz",
    "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz",
    "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz",
    "tracelens_vllm_gptoss_prefill_eager_b200.json.gz",
)

# Real kernel names copied from those traces (prefixes where the full name runs to kilobytes).
REAL_NAMES = {
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::"
    "Params)": ("cutlass gemm 128x32 (sm80)", "gemm"),
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x"
    "_cublas": ("cublas gemm 128x128x64 (sm90)", "gemm"),
    "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT": ("nvjet gemm 64x64", "gemm"),
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0": (
        "tensile gemm 256x32x64",
        "gemm",
    ),
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, false, true, false>(pytorch_flash::Flash_fwd_params)": ("flash_attn_fwd", "attention"),
    "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext": (None, "attention"),
    "kernel_unified_attention_3d": ("kernel_unified_attention_3d", "attention"),
    "reduce_segments": ("reduce_segments", "attention"),
    "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, 1, "
    "128, 256, false, 4, 1, ck_tile::ComposedAttention<0u, false> >(__hip_bfloat16 const*, int const*)": (
        "paged_attention_ll4mi_QKV_mfma16_kernel",
        "attention",
    ),
    "create_flashinfer_kv_indices_triton": ("create_flashinfer_kv_indices_triton", "attention"),
    "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16"
    " const*, __nv_bfloat16 const*, unsigned char*, unsigned char*, long const*, long"
    ", long, long, long, long, int, int,"
    " int, float const*, float const*)": ("vllm::reshape_and_cache_flash_kernel", "kv_cache"),
    "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)": (
        "store_kvcache",
        "kv_cache",
    ),
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat"
    "16*, c10::BFloat16*, c10::BFloat16 "
    "const*, int, long, long, long, int, int, int)": ("vllm::rotary_embedding_kernel", "rotary"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda(at"
    "::TensorIteratorBase&)::{lambda()#2"
    "}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::nati"
    "ve::cos_kernel_cuda(at::TensorIteratorBase&))": ("aten elementwise: cos", "rotary"),
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::ty"
    "pe vllm::fused_add_rms_norm_kernel<"
    "c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, c10::BFloat16 const*, float, int, int)": (
        "vllm::fused_add_rms_norm_kernel",
        "norm",
    ),
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib": (
        "aiter::add_rmsnorm_quant_kernel",
        "norm",
    ),
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27R"
    "msnorm2dFwdPipelineProblemIDF16b": (
        "ck_tile::kentry: Rmsnorm2dFwd",
        "norm",
    ),
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::M"
    "eanOps<float, float, float, float>,"
    " unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned "
    "int, float, 4>)": ("aten reduce: mean", "norm"),
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>("
    "at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)": ("at::indexSelectLargeIndex", "embedding"),
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::A"
    "rgMaxOps<float>, unsigned int, long,"
    " 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4, 4>)": (
        "aten reduce: argmax",
        "sampling",
    ),
    "void rocprim::ROCPRIM_400200_NS::detail::trampoline_kernel<rocprim::ROCPRIM_4002"
    "00_NS::detail::wrapped_scan_config<"
    "rocprim::ROCPRIM_400200_NS::default_config, long>>()": ("rocprim::trampoline_kernel", "sampling"),
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned "
    "int**, unsigned long, unsigned long)": ("multimem_all_reduce_kernel", "communication"),
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": (
        "ncclDevKernel_AllGather_RING_LL",
        "communication",
    ),
    "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu": (
        "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu",
        "moe",
    ),
    "_topk_forward": ("_topk_forward", "moe"),
    "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routing"
    "Renormalize::KernelParams<__nv_bflo"
    "at16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenorma"
    "lize::KernelParams<__nv_bfloat16>)": (
        "moe::routingIndicesHistogramKernel",
        "moe",
    ),
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp2"
    "56b_rM_TN_transOut_schedP2x1x2x3_bi"
    "asM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f": ("trtllm bmm MxE4m3_MxE2m1MxE4m3_Fp32 128x16x256 swiglu", "moe"),
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<a"
    "t::native::BinaryFunctor<c10::BFloa"
    "t16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&)": (
        "aten elementwise: mul",
        "elementwise",
    ),
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i": (
        "sgl_hip::activation::act_and_mul_kernel",
        "elementwise",
    ),
    "triton_poi_fused_add_bitwise_and_bitwise_not_bitwise_or_ge_lt_mul_sub_0": (
        "triton fused: add bitwise and not or ge lt mul sub",
        "elementwise",
    ),
    "void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQu"
    "antizationType)2, __nv_bfloat16, 32,"
    " true>(int, int, int, int, __nv_bfloat16 const*, float const*, unsigned int*, un"
    "signed int*, flashinfer::Quantizati"
    # not attention: "flashinfer" is only a parameter type
    "onSFLayout)": ("tensorrt_llm::quantize_with_block_size", "elementwise"),
    "Memcpy DtoD (Device -> Device)": ("Memcpy DtoD (Device -> Device)", "memcpy"),
    "Memset (Device)": ("Memset (Device)", "memset"),
    "resolve_future_token_ids_kernel": ("resolve_future_token_ids_kernel", "other"),
    # FlashInfer's decode kernel (its source's kernel name; not in these traces): attention, not kv_cache
    "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, "
    "(flashinfer::PageStorage)0, __nv_bfloat16>(flashinfer::paged_kv_t<__nv_bfloat16, int>)": (
        "flashinfer::BatchDecodeWithPagedKVCacheKernel",
        "attention",
    ),
    # host ops (CPU samples)
    "aten::mm": ("aten::mm", "gemm"),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (None, "attention"),
    "aten::index_copy_": ("aten::index_copy_", "kv_cache"),
    "aten::rsqrt": ("aten::rsqrt", "norm"),
    "aten::embedding": ("aten::embedding", "embedding"),
    "aten::isin": ("aten::isin", "sampling"),
    "aten::silu": ("aten::silu", "elementwise"),
    "aten::as_strided": ("aten::as_strided", "framework"),
    "TorchDynamo Cache Lookup": ("TorchDynamo Cache Lookup", "framework"),
    "Torch-Compiled Region: 0/0": ("Torch-Compiled Region: 0/0", "elementwise"),
}
# Names the issue gave as the shape of a short name (synthetic strings in the real families' formats).
ISSUE_EXAMPLES = {
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
    "cutlass::bfloat16_t>>>(flash::P)": ("flash_attn_fwd_sm90"),
    "nvjet_hsh_64x8_64x16_4x1_v_bz_splitK_TNT": "nvjet gemm 64x8 splitK",
    "triton_red_fused_add_mean_mul_pow_rsqrt_0": "triton fused: add mean mul pow rsqrt",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    "": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
}


@cache
def _load(path: str):
    timeline = load_trace(path)
    return timeline, analyze(timeline)


@cache
def _anatomy(path: str):
    timeline, result = _load(path)
    return anatomy(timeline, result)


@pytest.mark.parametrize("name", list(REAL_NAMES))
def test_short_name_and_category_of_real_names(name):
    short, category = REAL_NAMES[name]
    got = short_name(name)
    if short is not None:
        assert got == short
    assert len(got) <= MAX_CHARS
    _, cat = categorize(pd.Series([name]))
    assert str(cat[0]) == category, (got, str(cat[0]))


@pytest.mark.parametrize("name", list(ISSUE_EXAMPLES))
def test_short_names_of_the_issue_examples(name):
    assert short_name(name) == ISSUE_EXAMPLES[name]


@pytest.mark.parametrize("index", range(len(BUILTIN)))
def test_every_rule_is_the_first_match_for_a_real_name(index):
    rule = BUILTIN[index]
    hits = [n for n in REAL_NAMES if matching_rule(n, short_name(n)) is rule]
    assert hits, f"rule {index} ({rule.category}: {rule.pattern.pattern[:60]}) decides none of the real names"
    assert all(REAL_NAMES[n][1] == rule.category for n in hits)


@pytest.mark.parametrize("trace", GPU_LLM_TRACES)
def test_every_real_kernel_name_is_short(trace):
    events = load_trace(real_trace(trace)).events
    names = events.loc[events["kind"].isin(["kernel", "memcpy", "memset"]), "name"]
    shorts = short_names(names)
    assert max(len(s) for s in shorts.categories) <= MAX_CHARS
    assert len(shorts) == len(names)
    assert np.asarray(shorts)[0] == short_name(names.iloc[0])


@pytest.mark.parametrize("trace", GPU_LLM_TRACES)
def test_other_is_at_most_ten_percent_of_kernel_time(trace):
    events = load_trace(real_trace(trace)).events
    gpu = events[events["kind"].isin(["kernel", "memcpy", "memset"])]
    _, cat = categorize(gpu["name"])
    dur = gpu["dur"].to_numpy()
    share = 100 * dur[np.asarray(cat) == "other"].sum() / dur.sum()
    print(f"{trace}: other {share:.2f}% of {dur.sum() / 1e6:.1f} ms kernel time")
    assert share <= 10


@pytest.mark.parametrize("folder", ["cpu_tiny-llama_eager", "cpu_tiny-llama_compile"])
def test_other_is_at_most_ten_percent_of_host_op_time(folder):
    events = load_trace(SAMPLES / folder / "trace.json.gz").events
    cats = host_op_categories(events[events["kind"] == "cpu_op"])
    total = cats["self_ns"].sum()
    share = 100 * cats.loc[cats["category"] == "other", "self_ns"].sum() / total
    framework = 100 * cats.loc[cats["category"] == "framework", "self_ns"].sum() / total
    print(f"{folder}: other {share:.2f}%, framework {framework:.1f}% of {total / 1e6:.1f} ms host self time")
    assert share <= 10


def _reference_self_times(ops: pd.DataFrame) -> dict[int, int]:
    """Plain stack walk per thread (a loop over events is fine in a test): self time per row label."""
    out = {}
    for _, grp in ops.groupby("tid"):
        grp = grp.assign(end=grp["ts"] + grp["dur"]).sort_values(["ts", "dur"], ascending=[True, False], kind="stable")
        stack: list[list] = []  # [label, end, children_dur]
        for label, ts, dur, end in zip(grp.index, grp["ts"], grp["dur"], grp["end"], strict=True):
            while stack and stack[-1][1] <= ts and not (stack[-1][1] == ts and False):
                done = stack.pop()
                out[done[0]] = done[3] - done[2]
            if stack:
                stack[-1][2] += dur
            stack.append([label, end, 0, dur])
        while stack:
            done = stack.pop()
            out[done[0]] = done[3] - done[2]
    return {k: max(v, 0) for k, v in out.items()}


def test_host_self_time_matches_a_stack_walk():
    events = load_trace(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz").events
    ops = events[events["kind"] == "cpu_op"]
    cats = host_op_categories(ops)
    ref = pd.Series(_reference_self_times(ops)).reindex(cats.index)
    mismatch = (ref.to_numpy() != cats["self_ns"].to_numpy()).sum()
    assert mismatch <= len(ops) * 0.001, mismatch
    assert abs(cats["self_ns"].sum() - ref.sum()) <= 1e-3 * ref.sum()


def test_children_of_a_gemm_op_count_as_gemm():
    events = load_trace(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz").events
    ops = events[events["kind"] == "cpu_op"]
    cats = host_op_categories(ops)
    mm = ops[ops["name"] == "aten::mm"]
    # any other op that starts and ends inside an aten::mm of its thread (resolve_conj, ...) is gemm time
    strided = ops[ops["name"] != "aten::mm"]
    inside = np.zeros(len(strided), dtype=bool)
    for ts, end, tid in zip(mm["ts"], mm["ts"] + mm["dur"], mm["tid"], strict=True):
        inside |= (
            (strided["ts"].to_numpy() >= ts)
            & (strided["ts"] + strided["dur"]).to_numpy().__le__(end)
            & (strided["tid"].to_numpy() == tid)
        )
    assert inside.sum() > 0
    assert (cats.loc[strided.index[inside], "category"] == "gemm").all()
    assert set(ops.loc[strided.index[inside], "name"]) - {"aten::mm"}  # framework ops by their own names
    assert (cats.loc[strided.index[~inside], "category"] != "gemm").any()


def test_user_rules_come_first_and_bad_files_say_why(tmp_path):
    good = tmp_path / "cats.toml"
    good.write_text('communication = ["resolve_future_token_ids"]\nsampling = ["^aten::mm$"]\n')
    rules = load_rules(good)
    _, cat = categorize(pd.Series(["resolve_future_token_ids_kernel", "aten::mm", "aten::bmm"]), rules)
    assert list(np.asarray(cat)) == ["communication", "sampling", "gemm"]
    cases = {
        "unknown.toml": ('gemmm = ["x"]\n', "unknown category 'gemmm'"),
        "regex.toml": ('gemm = ["(unclosed"]\n', "gemm rule '\\(unclosed' cannot be used"),
        "toml.toml": ("gemm = [\n", "not valid TOML"),
        "type.toml": ("gemm = [1, 2]\n", "list of regex strings"),
    }
    for fname, (text, message) in cases.items():
        path = tmp_path / fname
        path.write_text(text)
        with pytest.raises(ValueError, match=message) as info:
            load_rules(path)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="no categories file"):
        load_rules(tmp_path / "missing.toml")


@pytest.mark.parametrize("trace", GPU_LLM_TRACES)
def test_step_category_counts_add_up_to_the_steps_kernels(trace):
    path = str(real_trace(trace))
    _, result = _load(path)
    anat = _anatomy(path)
    per_step = anat.step_categories.groupby("step")["kernels"].sum().reindex(range(len(result.steps)), fill_value=0)
    assert per_step.tolist() == result.steps["kernels"].tolist()
    step_json = anat.step_json(0)
    assert set(step_json) <= set(CATEGORIES)
    assert sum(v["kernels"] for v in step_json.values()) == result.steps["kernels"].iloc[0]


# Layer ground truth, established independently of the kernel sequence's period:
# - Qwen3-8B: 36 layers (its config.json); the SGLang step has 36 paged_attention kernels.
# - gpt-oss-20b: 24 layers; the full-graph decode step has 48 RMSNorm kernels (2 per layer) and
#   alternates 12 sliding-window (unified_attention_2d) with 12 full-attention (3d) layers.
# - the mixed piecewise step (gpt-oss-20b again): 48 RMSNorm kernels; its last layer differs from
#   the rest by two kernels (it ends in the final norm), so it is found as a near copy.
# - gpt-oss-120b: 36 layers; the B200 eager step (TP 8) has 72 fused_add_rms_norm kernels.
# - Qwen1.5-0.5B: 24 layers (its config.json); the forward's flash_fwd kernels: 24 in this step.
LAYER_TRUTH = {
    "tracelens_sglang_qwen3-8b_decode_mi300x.json.gz": 36,
    "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz": 24,
    "tracelens_vllm_gptoss_prefill_eager_b200.json.gz": 36,
    "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz": 24,
    "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz": 24,
}


@pytest.mark.parametrize("trace", list(LAYER_TRUTH))
def test_layers_of_real_traces(trace):
    path = str(real_trace(trace))
    anat = _anatomy(path)
    assert anat.layers.layers == LAYER_TRUTH[trace], anat.layers.evidence
    lay = anat.layers.layer_us
    assert lay["min"] <= lay["p50"] <= lay["p90"] <= lay["max"]
    assert anat.layers.head_us >= 0 and anat.layers.tail_us >= 0


def test_attention_kernels_confirm_the_layer_truth():
    """Ground truth cross-check from the kernel names alone (not the period search)."""
    anat = _anatomy(str(real_trace("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz")))
    names = anat.work["short"].astype(str)
    assert (names == "paged_attention_ll4mi_QKV_mfma16_kernel").sum() == 36
    anat = _anatomy(str(real_trace("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")))
    names = anat.work["short"].astype(str)
    assert names.str.startswith("kernel_unified_attention_").sum() == 24
    assert (names == "ck_tile::kentry: Rmsnorm2dFwd").sum() == 49  # 2 per layer + the final norm
    anat = _anatomy(str(real_trace("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")))
    names = anat.work["short"].astype(str)
    assert (names == "vllm::fused_add_rms_norm_kernel").sum() == 72  # 2 per layer, 36 layers


def _run_config(folder: str) -> dict:
    return json.loads((SAMPLES / folder / "run.json").read_text())["model"]["config"]


def test_tiny_preset_eager_has_its_configs_layers():
    path = str(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz")
    anat = _anatomy(path)
    assert anat.median_kind == "decode"
    assert anat.layers.layers == _run_config("cpu_tiny-llama_eager")["num_hidden_layers"] == 4


def test_tiny_preset_compiled_has_its_configs_layers():
    # the compiled graph's layers alternate 27 and 29 host ops: the block found is two layers
    anat = _anatomy(str(SAMPLES / "cpu_tiny-llama_compile" / "trace.json.gz"))
    assert anat.layers.layers == _run_config("cpu_tiny-llama_compile")["num_hidden_layers"] == 4


@pytest.mark.parametrize(("preset", "mode"), [("tiny-qwen2", "eager"), ("tiny-phi3", "compile")])
def test_captured_presets_have_their_configs_layers(tmp_path, preset, mode):
    from stepscope.collectors.run import RunSpec, run_profiled_generation

    spec = RunSpec(preset=preset, device="cpu", prompt_tokens=8, new_tokens=4, mode=mode)
    run_dir = run_profiled_generation(spec, tmp_path)
    config = json.loads((run_dir / "run.json").read_text())["model"]["config"]
    timeline = load_trace(run_dir / "trace.json.gz")
    anat = anatomy(timeline, analyze(timeline))
    assert anat.median_kind == "decode"
    assert anat.layers.layers == config["num_hidden_layers"], anat.layers.evidence


def test_no_repetition_says_so_instead_of_guessing():
    from stepscope.analysis.layers import detect_layers

    rng = np.random.default_rng(0)
    codes = rng.permutation(200)  # synthetic: 200 distinct kernels, nothing repeats
    res = detect_layers(codes, codes % 5, np.arange(200) * 10, np.arange(200) * 10 + 5)
    assert res.layers is None and "layers not counted" in res.evidence


def test_category_roofline_from_the_run_config():
    folder = "cpu_tiny-llama_eager"
    path = str(SAMPLES / folder / "trace.json.gz")
    timeline, result = _load(path)
    config = _run_config(folder)
    shape = shape_from_config(config, dtype="float32")
    hw = Hardware("test CPU", memory_bytes_per_s=10e9, flops_per_s=1e11, kind="cpu")
    anat = anatomy(timeline, result, model=shape, hardware=hw)
    roof = anat.roofline
    assert roof["status"] == "ok"
    h, n = config["hidden_size"], config["num_hidden_layers"]
    inter, vocab = config["intermediate_size"], config["vocab_size"]
    head_dim = h // config["num_attention_heads"]
    q, kv = h, config["num_key_value_heads"] * head_dim
    weights = n * (h * (q + 2 * kv) + q * h + 3 * h * inter) * 4 + (vocab * h + h) * 4
    gemm = next(r for r in roof["categories"] if r["category"] == "gemm")
    assert gemm["bytes"] == weights
    step = result.steps.iloc[anat.median_step]
    context = 16 + (int(step["index"]) - 1)  # 16 prompt tokens, then one per earlier decode step
    attention = next(r for r in roof["categories"] if r["category"] == "attention")
    assert roof["context"] == context
    assert attention["bytes"] == n * context * 2 * kv * 4
    measured_us = anat.median_categories()["gemm"]["time_us"]
    assert gemm["achieved_gb_s"] == pytest.approx(weights / (measured_us / 1e6) / 1e9, rel=1e-3)
    assert gemm["pct_of_roofline"] == pytest.approx(100 * (weights / 10e9 * 1e6) / measured_us, rel=1e-3)
    assert roof["finding"] and roof["finding"].split()[0] in ("gemm", "attention")
    (finding,) = [f for f in anat.findings() if f.id == "category-roofline"]
    worst = min((r for r in roof["categories"]), key=lambda r: r["pct_of_roofline"])
    assert finding.title.startswith(worst["category"]) and finding.evidence["bytes"] == worst["bytes"]
    assert "elementwise" in roof["overhead_us"]
    assert sum(roof["gemm_groups_bytes"].values()) == n * (h * (q + 2 * kv) + q * h + 3 * h * inter) * 4 + vocab * h * 4


def test_category_roofline_without_a_model_says_it_needs_one():
    anat = _anatomy(str(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"))
    assert "needs a model" in anat.roofline["status"]


def test_compare_eager_against_compiled():
    a = _anatomy(str(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"))
    b = _anatomy(str(SAMPLES / "cpu_tiny-llama_compile" / "trace.json.gz"))
    result = compare_anatomy(a, b)
    rows = {r["category"]: r for r in result["categories"]}
    ca = a.median_categories()
    for cat, row in rows.items():
        assert row["a_us"] == ca.get(cat, {}).get("time_us", 0.0)
        assert row["delta_us"] == pytest.approx(row["b_us"] - row["a_us"])
    assert result["layers"]["a"]["layers"] == 4
    phrase = anatomy_phrase(result, launches_a=515, launches_b=124)
    assert phrase.startswith("B removed 391 launches")
    moved = max((r for r in rows.values() if r["a_us"] > 0), key=lambda r: abs(r["delta_us"]))
    assert moved["category"] in phrase


def test_summary_and_step_json_are_plain_json():
    folder = "cpu_tiny-llama_eager"
    timeline, result = _load(str(SAMPLES / folder / "trace.json.gz"))
    shape = shape_from_config(_run_config(folder), dtype="float32")
    hw = Hardware("test CPU", memory_bytes_per_s=10e9, flops_per_s=1e11, kind="cpu")
    anat = anatomy(timeline, result, model=shape, hardware=hw)
    text = json.dumps({"anatomy": anat.summary(), "steps": [anat.step_json(i) for i in range(len(result.steps))]})
    back = json.loads(text)
    assert back["anatomy"]["layers"] == 4
    # each step's category times add up to its host ops' self time (nested ops counted once)
    work = anat.work[anat.work["step"] >= 0]
    per_step = work.groupby("step")["time_ns"].sum() / 1e3
    for i, cats in enumerate(back["steps"]):
        assert sum(c["time_us"] for c in cats.values()) == pytest.approx(per_step.get(i, 0.0), abs=0.01 * len(cats))
    table = anat.step_table()
    assert len(table) == len(result.steps) and "gemm_us" in table


def test_user_rules_reach_the_anatomy(tmp_path):
    rules_file = tmp_path / "cats.toml"
    rules_file.write_text('sampling = ["^aten::mm$"]\n')
    timeline, result = _load(str(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"))
    plain = _anatomy(str(SAMPLES / "cpu_tiny-llama_eager" / "trace.json.gz"))
    ruled = anatomy(timeline, result, rules=load_rules(rules_file))
    step = plain.median_step
    assert "gemm" in plain.step_json(step)
    # aten::mm is now sampling; aten::linear/matmul around it stay gemm but keep only their own self time
    assert ruled.step_json(step)["sampling"]["time_us"] > plain.step_json(step)["sampling"]["time_us"]
    assert ruled.step_json(step)["gemm"]["time_us"] < plain.step_json(step)["gemm"]["time_us"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "<<<<",
        ")))(((",
        "void f<" * 2000,
        "_Z" + "9" * 50,
        "_ZN999999abcE",
        "triton_poi_fused_",
        "x" * 100_000,
        "Memcpy \u202e evil <script>",
    ],
    ids=[f"hostile-{i}" for i in range(9)],
)
def test_hostile_names_get_a_short_label_without_error(name):
    label = short_name(name)
    assert isinstance(label, str) and len(label) <= MAX_CHARS
    _, cat = categorize(pd.Series([name]))
    assert str(cat[0]) in CATEGORIES


def test_generic_kernels_take_the_category_of_the_module_that_launched_them():
    """HF Qwen1.5 on H100 recorded its python stack: the elementwise kernels launched inside an
    nn.Module Qwen2RMSNorm span are RMSNorm's (unfused pow/mean/add/rsqrt/mul)."""
    path = str(real_trace("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz"))
    timeline, _ = _load(path)
    ev = timeline.events
    spans = ev[(ev["kind"] == "python") & ev["name"].astype(str).str.startswith("nn.Module: Qwen2RMSNorm")]
    launches = ev[ev["kind"] == "runtime"]
    inside = np.zeros(len(launches), dtype=bool)
    for ts, dur, tid in zip(spans["ts"], spans["dur"], spans["tid"], strict=True):
        inside |= (
            (launches["ts"].to_numpy() >= ts)
            & (launches["ts"].to_numpy() < ts + dur)
            & (launches["tid"].to_numpy() == tid)
        )
    corr = set(launches["correlation"].to_numpy()[inside].tolist())
    kernels = ev[(ev["kind"] == "kernel") & ev["correlation"].isin(corr)]
    assert len(kernels) >= 24 * 2 * 4  # two norms per layer, several kernels each
    anat = _anatomy(path)
    work = anat.work.set_index("start_ns")
    cats = work.loc[kernels["ts"].to_numpy(), "category"].astype(str)
    assert (cats == "norm").all(), cats.value_counts()
    assert any("nn.Module" in note for note in anat.notes)


@pytest.mark.parametrize("folder", ["cpu_tiny-llama_eager", "cpu_tiny-llama_compile"])
def test_cpu_step_counts_are_the_steps_host_ops(folder):
    path = str(SAMPLES / folder / "trace.json.gz")
    _, result = _load(path)
    anat = _anatomy(path)
    per_step = anat.step_categories.groupby("step")["kernels"].sum().reindex(range(len(result.steps)), fill_value=0)
    assert per_step.tolist() == result.steps["kernels"].tolist()
