"""Kernel names of every vendor and library, spelled as real traces spell them, and what `trace_report/kernels/` reads from
each: the family that generated it, whether it is a GEMM, the kind of work (`kind_of_kernel`), and the details a reader
checks (dtype, tile, arch, layout, pass).

The names come from public traces other people's programs wrote (the sources of trace_report/tests/fixtures/world/, see its
README.md: AMD's TraceLens test traces, Holistic Trace Analysis' test data, PyTorch's kineto samples, vLLM and SGLang
serving traces, DeepSeek's profile data), a few from this suite's own H200 fixtures; the comment above each says where.
They are typed out here, not read from the traces, so that a test names what it checks. Every expectation is what the
package decodes correctly today; where it decodes a name wrongly (a family missed, a kind mistaken) the test leaves that
field unchecked (None) rather than pin the mistake.
"""

from __future__ import annotations

import time

import pytest

from trace_report.device import gpu_label
from trace_report.kernels import (ATTENTION, COMMUNICATION, CONVOLUTION, COPY, ELEMENTWISE, GEMM,
                                                 INDEXING, NORMALIZATION, OPTIMIZER, REDUCTION, ROUTING, decode,
                                                 decode_nccl, demangle, gfx_in_name, gfx_label, kind_of_kernel,
                                                 math_unit)
from trace_report.kernels.name import SHORT_LIMIT

# --- the names -------------------------------------------------------------------------------------------------
# Long names are split over lines; the pieces join into the name byte for byte as the trace has it.

# traceMap trace_file/examples/1_h100_1000isl_10osl_32con.pt.trace.json.gz
FA3_FWD = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90"
    "<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, "
    "128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, true, false, false, true, true, "
    "true, true, false>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, cutlass::arch::Sm90, 128, true, true, "
    "true, false>, flash::VarlenDynamicPersistentTileScheduler<64, 128, 128, true, true, true> > > "
    ">(flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, 128, "
    "cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, true, false, false, true, true, "
    "true, true, false>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, cutlass::arch::Sm90, 128, true, true, "
    "true, false>, flash::VarlenDynamicPersistentTileScheduler<64, 128, 128, true, true, true> > >::Params)"
)
# traceMap trace_file/examples/1_h100_1000isl_10osl_32con.pt.trace.json.gz
FA3_COMBINE = (
    "void cutlass::device_kernel<flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 5, 256, 1, "
    "false, true, cutlass::bfloat16_t, float, cutlass::arch::Sm90> "
    ">(flash::FlashAttnFwdCombine<cute::tuple<cute::C<8>, cute::C<128> >, 5, 256, 1, false, true, "
    "cutlass::bfloat16_t, float, cutlass::arch::Sm90>::Params)"
)
# DeepSeek profile-data train.json
FA3_BWD = (
    "void cutlass::device_kernel<flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2, cute::tuple<cute::C<1>, "
    "cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<192> >, cute::tuple<cute::C<64>, "
    "cute::C<128>, cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, true, false, false, false, "
    "1, 2, 1>, flash::CollectiveEpilogueBwd<cute::tuple<cute::C<64>, cute::C<128>, cute::C<192> >, "
    "cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, 2, cutlass::bfloat16_t, 256, true>, "
    "flash::SingleTileSchedulerBwd> >(flash::FlashAttnBwd<flash::CollectiveMainloopBwd<2, cute::tuple<cute::C<1>, "
    "cute::C<1>, cute::C<1> >, cute::tuple<cute::C<64>, cute::C<128>, cute::C<192> >, cute::tuple<cute::C<64>, "
    "cute::C<128>, cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, true, false, false, false, "
    "1, 2, 1>, flash::CollectiveEpilogueBwd<cute::tuple<cute::C<64>, cute::C<128>, cute::C<192> >, "
    "cute::tuple<cute::C<64>, cute::C<128>, cute::C<128> >, 2, cutlass::bfloat16_t, 256, true>, "
    "flash::SingleTileSchedulerBwd>::Params)"
)
# DeepSeek profile-data train.json
FA3_PREPROCESS = (
    "void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<192> >, "
    "cute::tuple<cute::C<64>, cute::C<128> >, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, true> "
    ">(flash::FlashAttnBwdPreprocess<cute::tuple<cute::C<64>, cute::C<192> >, cute::tuple<cute::C<64>, cute::C<128> "
    ">, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, true>::Params)"
)
# TraceLens tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz
FA2_NAMESPACED_TRAITS = (
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, false, true, false>(pytorch_flash::Flash_fwd_params)"
)
# DeepSeek profile-data train.json
FA3_EARLY = (
    "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, "
    "true, flash::SingleTileScheduler, flash::SeqLenTraits<true> "
    ">(flash::CollectiveMainloopFwd<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, cutlass::bfloat16_t, "
    "128>, true, flash::SeqLenTraits<true> >::Params, flash::CollectiveEpilogueFwd<Flash_fwd_kernel_traits<192, 128, "
    "128, 12, 2, false, 1, cutlass::bfloat16_t, 128>, flash::SeqLenTraits<true> >::Params, "
    "flash::SingleTileScheduler::Params, flash::SeqLenTraits<true>, flash::SeqLenTraits<true>)"
)
# traceMap trace_file/examples/1_h100_1000isl_10osl_32con.pt.trace.json.gz
CUTLASS_RELU = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf"
    "16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)"
)
# HTA tests/data/nccl_parser_config/nccl_data.json.gz
CUTLASS_SIMT = (
    "void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Par"
    "ams)"
)
# HTA tests/data/trace_file_list/inference_rank_1.json.gz
CUTLASS_WMMA_VOLTA = (
    "void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8>(cutlass_70_wmma_tensorop"
    "_f16_s161616gemm_f16_32x32_64x2_tn_align8::Params)"
)
# DeepSeek profile-data train.json
DPSK_GROUPED_GEMM = (
    "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel>(dpsk::grouped_gemm::cuda::fp"
    "8_dptp128c_acc::GemmKernel::Params)"
)
# TraceLens tests/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz
XMMA_GEMM = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
    "cublas"
)
# kineto tb_plugin/samples/resnet50_profiler_api_num_workers_0/worker0.pt.trace.json.gz
SPLITK_REDUCE = (
    "void splitKreduce_kernel<float, float, float>(cublasSplitKParams<float>, float const*, float const*, float*, "
    "float const*, float const*)"
)
# HTA tests/data/negative_queue_length_values_check/rank0.json.gz
GEMV = (
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, "
    "cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)"
)
# HTA tests/data/nccl_parser_config/nccl_data.json.gz
CUDNN_BN_BACKWARD = (
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, "
    "cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, "
    "float*, float*, float const*, float const*, float)"
)
# kineto tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz
CUDNN_BN_FORWARD = (
    "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct, float const*, "
    "cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, "
    "float)"
)
# HTA tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz
CUDNN_NCHW_TO_NHWC = (
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, "
    "(cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)"
)
# HTA tests/data/nccl_parser_config/nccl_data.json.gz
CUDNN_CUTLASS_WGRAD = (
    "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultista"
    "geINS_4gemm9GemmShapeILi128ELi128ELi32EEENS4_52Conv2dWgradOutputGradientTileAccessIteratorOptimizedINS_11MatrixS"
    "hapeILi128ELi32EEENS_10tfloat32_tENS_9transform29PitchLinearWarpRakedThreadMapINS_16PitchLinearShapeILi128ELi32E"
    "EELi128ENSF_ILi8ELi4EEELi4EEENS_12AlignedArrayISC_Li4ELi16EEEEENSD_11threadblock25RegularTileAccessIteratorISB_S"
    "C_NS_6layout40ColumnMajorTensorOpMultiplicandCongruousILi32ELi32EEELi1ESI_Li16EEELNS_4arch14CacheOperation4KindE"
    "0ENS4_48Conv2dWgradActivationTileAccessIteratorOptimizedINSA_ILi32ELi128EEESC_SI_SK_EENSN_ISW_SC_NSO_37RowMajorT"
    "ensorOpMultiplicandCongruousILi32ELi32EEELi0ESI_Li16EEELSU_0ENS6_11threadblock9MmaPolicyINS6_4warp11MmaTensorOpI"
    "NS7_ILi64ELi64ELi32EEESC_SQ_SC_SZ_fNSO_8RowMajorENS13_17MmaTensorOpPolicyINSS_3MmaINS7_ILi16ELi8ELi8EEELi32ESC_S"
    "16_SC_NSO_11ColumnMajorEfS16_NSS_13OpMultiplyAddEEENSA_ILi1ELi1EEEEELi1ELb0EbEENSA_ILi0ELi0EEES1G_Li1EEELi4EbEEN"
    "S_8epilogue11threadblock8EpilogueIS8_S1F_Li1ENS1K_22PredicatedTileIteratorINS1K_26OutputTileOptimalThreadMapINS1"
    "K_15OutputTileShapeILi128ELi8ELi2ELi1ELi1EEENS1O_ILi1ELi8ELi1ELi1ELi8EEELi128ELi4ELi32EEEfLb0ENSO_9NoPermuteELb0"
    "EEENS1J_4warp24FragmentIteratorTensorOpIS15_S19_fNS_5ArrayIfLi4ELb1EEES16_EENS1U_20TileIteratorTensorOpIS15_S19_"
    "fS16_EENS1K_18SharedLoadIteratorINS1R_18CompactedThreadMapEfLi16EEENS1J_6thread17LinearCombinationIfLi4EffLNS24_"
    "9ScaleType4KindE0ELNS_15FloatRoundStyleE2EEENSA_ILi0ELi8EEELi2ELi1EEENS11_30GemmIdentityThreadblockSwizzleILi4EE"
    "ELNS1_8OperatorE2ENS1_17Conv2dProblemSizeELNS1_9GroupModeE0EEEEEvNT_6ParamsE"
)
# HTA tests/data/nccl_parser_config/nccl_data.json.gz
CUDNN_XMMA_FPROP = (
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor"
    "16x8x8_execute_kernel_cudnn_infer"
)
# HTA tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz
CUDNN_WINOGRAD = (
    "void cudnn::winograd_nonfused::winogradForwardData4x4<float, "
    "float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)"
)
# kineto tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz
CUDNN_OFFSETS = "cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)"
# HTA tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz
ATEN_FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> "
    ">(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
)
# TraceLens tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz
ATEN_GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() "
    "const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, "
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
    "const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
# HTA tests/data/nccl_parser_config/nccl_data.json.gz
ATEN_FOREACH_MUL = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, "
    "std::multiplies<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous "
    "namespace)::BinaryOpScalarFunctor<float, 1, 1, 0>, std::multiplies<float>, float)"
)
# HTA tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz
ATEN_MEAN = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)"
)
# HTA tests/data/trace_filter/sampled_rank-0.json.gz
ATEN_LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
    "float const*, float const*, float*, float*, float*)"
)
# TraceLens tests/traces/h100/google_owlv2-large-patch14-ensemble__1016001.json.gz
ATEN_SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
# DeepSeek profile-data train.json
ATEN_TOPK = (
    "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, unsigned "
    "int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<float, "
    "unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int, float*)"
)
# HTA tests/data/trace_filter/sampled_rank-0.json.gz
ATEN_INDEX_SELECT = (
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<long, long, unsigned int, 1, 1, -2, "
    "true>(at::cuda::detail::TensorInfo<long, unsigned int>, at::cuda::detail::TensorInfo<long, unsigned int>, "
    "at::cuda::detail::TensorInfo<long, unsigned int>, int, int, unsigned int, unsigned int, long)"
)
# HTA tests/data/df_index_resolver/df_index_resolver.json.gz
ATEN_CAT = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*, "
    "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
    "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
)
# TraceLens evals/unit_tests/elementwise/elem_01_add_poor_bw_analysis_output/elem_01_add_poor_bw.json
ATEN_ADD_CLONE_KD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> "
    ">(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>) [clone .kd]"
)
# TraceLens tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz
ATEN_BN_STATS = (
    "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, c10::BFloat16, float, "
    "int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>, float, float, "
    "at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float, "
    "1ul, at::RestrictPtrTraits, int>)"
)
# TraceLens tests/traces/b200/eager_trace.json.gz
MULTIMEM_ALL_REDUCE = (
    "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, "
    "unsigned int**, unsigned long, unsigned long)"
)
# TraceLens tests/traces/inference/xdit_flux_aiter/profile_trace_rank_0.json.gz
HIPBLASLT_GEMM = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x32_MI16x16x1_SN_LDSB1_AFC1_AG0_AFEM1_AFEM1_ASEM1_CLR1_CAD"
    "S0_DTLA0_DTLB0_DTVA0_DTVB0_DTVMXSA0_DTVMXSB0_DTVSM0_DPLB0_EPS0_ELFLR0_EMLLn1_FDSI0_GRPM1_GRVWA4_GRVWB4_GSUAMB_GL"
    "S0_ISA942_IU1_K1_LDSTI0_LBSPPA512_LBSPPB512_LBSPPM0_LPA4_LPB4_LPM0_LRVW4_LWPMn1_MIAV0_MIWT8_8_MO40_MGRIPM1_NTn1_"
    "NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SGROB0_SIA3_SS1_SPO0_SRVW0_SSO0_SVW8_SK0_SKFTR0"
    "_SKXCCM0_SGRO0_TDMI0_TIN0_TLDS1_TLDSM1_ULSGRO1_USL1_USLMX0_UIOFGRO0_UPLRP0_USFGROn1_USI0_VSn1_VWA8_VWB8_WSGRA0_W"
    "SGRB0_WS64_WG32_8_1"
)
# TraceLens evals/unit_tests/gemm/gemm_01_compute_few_tiles_analysis_output/gemm_01_compute_few_tiles.json
TENSILE_SPLIT_K_GEMM = (
    "Cijk_Ailk_Bljk_BBS_BH_MT256x128x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM8_AF1EM8_AMAS3_ASE_ASGT3256_ASLT_"
    "ASM_ASAE01_ASCE01_ASEM64_AAC0_BL1_BS1_CLR1_DTLA0_DTLB0_DTVA1_DTVB0_DVO0_ETSP_EPS1_ELFLRn20_EMLL0_FSSC10_FL1_GLVW"
    "A2_GLVWB2_GRCGA1_GRCGB1_GRPM0p50_GRVWn1_GSU2_GSUAMB_GLS0_ISA942_IU1_K1_KLA_LBSPPA0_LBSPPB256_LPA0_LPB4_LDL1_LRVW"
    "4_LWPMn1_LDW0_FMA_MIAV0_MDA2_MO40_MMFSC_MKFGSU256_NTA0_NTB0_NTC3_NTD3_NEPBS16_NLCA2_NLCB1_ONLL1_OPLV0_PK0_PAP0_P"
    "GR2_PLR5_PKA0_SIA3_SLW1_SS1_SU0_SUM0_SUS0_SCIUI1_SPO1_SRVW0_SSO0_SVW2_SNLL0_TSGRA0_TSGRB0_TT4_128_TLDS1_UMLDSA0_"
    "UMLDSB1_USFGROn1_VAW1_VSn1_VW2_VWB2_VFLRP1_WSGRA0_WSGRB0_WS64_WG64_4_1_WGM1"
)
# HTA tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz
HIPBLASLT_GFX90A = (
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVW"
    "A2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128_LBSPPM0_LPA8_LPB8_LPM0_LRVW4_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_N"
    "TA0_NTB0_NTC0_NTD0_NTM0_NEPBS2_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO1_SRVW0_SSO0_SVW1_TLDS1_USFGROn1_VSn"
    "1_VWA1_VWB1_WSGRA1_WSGRB1_WS64_WG64_4_1"
)
# TraceLens tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz
IGEMM_FWD = (
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2_ta1x8x2x1_1x4x1x64_tb1x8x2x1_1x4x1x64"
)
# TraceLens tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz
IGEMM_WRW = (
    "igemm_wrw_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x64_wt32x32x8_ws1x1_wr1x1_ta1x4x1x4_1x16x1x16_tb1x4x1x4_1x16x1x16_gkgs"
)
# TraceLens tests/traces/inference/vllm_decode_full/graph_execution.json.gz
CK_RMSNORM = (
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16b"
    "DF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEE"
    "EENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE1ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rm"
    "snorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogu"
    "eProblemIfDF16bLb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_"
)
# TraceLens tests/traces/mi300/ddp_resnet18_no_pool/train_resnet18.json.gz
CK_GROUPED_CONV = (
    "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_34GridwiseGemmMultiD_x"
    "dl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS6_11ColumnMajorENS_5TupleIJEEES7_ttftSA_tNS0_12element_wise11P"
    "assThroughESC_SC_LNS1_18GemmSpecializationE7ELi256ELi128ELi128ELi64ELi8ELi8ELi32ELi32ELi2ELi2ENS_8SequenceIJLi8E"
    "Li32ELi1EEEENSE_IJLi1ELi0ELi2EEEESG_Li2ELi8ELi8ELb0ELi0ESF_SG_SG_Li2ELi8ELi8ELb0ELi0ELi1ELi1ENSE_IJLi1ELi32ELi1E"
    "Li8EEEENSE_IJLi8EEEELNS_26BlockGemmPipelineSchedulerE0ELNS_24BlockGemmPipelineVersionE2EttttLb0ELb0EEENS1_30Comp"
    "utePtrOffsetOfStridedBatchILi1ELi1ELi0EvEENS_16TensorDescriptorINS9_IJNS_5EmbedINS9_IJiiiiEEESQ_Lb0EEENS_11PassT"
    "hroughIiEENS_3PadIiiiLb0EEESV_ST_ST_NSP_INS9_IJiiEEESW_Lb0EEESX_ST_NS_23Merge_v2_magic_divisionINS9_IJiiiEEEEES1"
    "0_NS_8RightPadIiiLb0EEES12_NS_7UnMergeISW_Lb0EEEST_EEENS9_IJNSE_IJLi0EEEENSE_IJLi1EEEENSE_IJLi2EEEENSE_IJLi3EEEE"
    "NSE_IJLi4EEEENSE_IJLi5EEEENSE_IJLi6EEEENSE_IJLi7EEEESI_NSE_IJLi9ELi11ELi13EEEENSE_IJLi10ELi12ELi14EEEENSE_IJLi15"
    "EEEENSE_IJLi16EEEENSE_IJLi18EEEENSE_IJLi17EEEEEEENS9_IJNSE_IJLi1ELi2ELi3ELi4EEEES1B_S1C_S1D_SI_NSE_IJLi9EEEENSE_"
    "IJLi10ELi11EEEENSE_IJLi12ELi13EEEENSE_IJLi14EEEES1G_S1H_S1J_S1I_NSE_IJLi19ELi20EEEENSE_IJLi21EEEEEEENSE_IJLi19EL"
    "i21ELi20EEEElEENSO_INS9_IJS14_S12_S12_S14_ST_EEENS9_IJS16_S17_S18_S1A_S19_EEENS9_IJNSE_IJLi1ELi2EEEES19_S1A_NSE_"
    "IJLi5ELi6EEEES1D_EEENSE_IJLi5ELi7ELi6EEEElEESA_NSO_INS9_IJSX_S12_S12_EEENS9_IJS16_S17_S18_EEENS9_IJS1X_S19_S1A_E"
    "EENSE_IJLi3ELi4EEEElEELb1ELNS_25InMemoryDataOperationEnumE0ELi1ELNS_10TailNumberE10EEEvNT_8ArgumentET1_T2_T3_T4_"
    "T0_S2F_"
)
# TraceLens tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz
CK_FMHA_PREFILL = (
    "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVSAsync"
    "INS_36BlockFmhaBatchPrefillPipelineProblemIDF16bDF16bDF16bffDF16bhfDF16bfDF16bNS_13TileFmhaShapeINS_8sequenceIJL"
    "i128ELi128ELi32ELi128ELi32ELi128EEEENS5_IJLi4ELi1ELi1EEEENS5_IJLi32ELi32ELi16EEEES7_S8_Lb1EEELb1ENS_17ComposedAt"
    "tentionILj0ELb1EEENS_30SimplifiedGenericAttentionMaskILb1EEELb0ELi1ENS_26TileFmhaBatchPrefillTraitsILb1ELb1ELb1E"
    "Lb1ELb0ELNS_22BlockAttentionBiasEnumE0ELb0ELb0ELb0ELNS_28BlockAttentionQuantScaleEnumE0ELin1ELb0ELb0ELi1ELNS_37B"
    "lockAttentionKVCacheMemoryLayoutEnumE1ELNS_36BlockAttentionKVCacheLookupTableEnumE1ELNS_33BlockAttentionKVCacheL"
    "oadModeEnumE0EEEEENS_53BlockFmhaBatchPrefillPipelineQRKSVSAsyncDefaultPolicyEEENS_17Default2DEpilogueINS_24Defau"
    "lt2DEpilogueProblemIfDF16bLb1ELb1ELb1EEEvEEEEJNSS_21FmhaFwdGroupModeKargsEEEEvDpT1_"
)
# TraceLens tests/traces/mi300/resnet_act_checkpoint.json.gz
CK_BWD_WEIGHT = (
    "_ZN2ck16tensor_operation6device37kernel_batched_gemm_xdlops_bwd_weightINS_47GridwiseGemm_bk0mk1_bk0nk1_mn_xdlops"
    "_bwd_weightILi64EttftLNS_25InMemoryDataOperationEnumE1ENS_16TensorDescriptorINS_5TupleIJNS_5EmbedINS6_IJiiEEENS6"
    "_IJiNS_17integral_constantIiLi1EEEEEELb0EEENS_8RightPadIiiLb0EEENS_11PassThroughIiEENS_7UnMergeINS6_IJiiiEEELb0E"
    "EESG_SG_SG_SE_SG_EEENS6_IJNS_8SequenceIJLi0EEEENSL_IJLi1EEEENSL_IJLi2EEEENSL_IJLi3EEEENSL_IJLi4EEEENSL_IJLi5EEEE"
    "NSL_IJLi6EEEENSL_IJLi8EEEENSL_IJLi7EEEEEEENS6_IJNSL_IJLi1ELi2EEEESP_SQ_NSL_IJLi5ELi6ELi7EEEEST_NSL_IJLi9EEEENSL_"
    "IJLi10EEEENSL_IJLi11EEEENSL_IJLi12EEEEEEENSL_IJLi9ELi10ELi11ELi12EEEElEENS5_INS6_IJNS7_INS6_IJiiiiEEES15_Lb0EEES"
    "G_NS_3PadIiiiLb0EEES18_SG_SG_NS7_IS8_S8_Lb0EEES19_SG_NS_23Merge_v2_magic_divisionISI_EES1B_SE_SG_SJ_SG_SG_SG_SE_"
    "SG_EEENS6_IJSM_SN_SO_SP_SQ_SR_SS_SU_ST_NSL_IJLi10ELi12ELi14EEEENSL_IJLi9ELi11ELi13EEEENSL_IJLi16EEEENSL_IJLi15EE"
    "EENSL_IJLi17EEEENSL_IJLi18EEEENSL_IJLi19EEEENSL_IJLi20EEEENSL_IJLi22EEEENSL_IJLi21EEEEEEENS6_IJNSL_IJLi1ELi2ELi3"
    "ELi4EEEESR_SS_SU_ST_SY_NSL_IJLi10ELi11EEEENSL_IJLi12ELi13EEEENSL_IJLi14EEEES1G_S1F_S1H_S1I_NSL_IJLi19ELi20ELi21E"
    "EEES1L_NSL_IJLi23EEEENSL_IJLi24EEEENSL_IJLi25EEEENSL_IJLi26EEEEEEENSL_IJLi23ELi24ELi25ELi26EEEElEENS5_INS6_IJSC_"
    "SE_SE_EEENS6_IJSM_SN_SO_EEENS6_IJSW_SP_SQ_EEENSL_IJLi3ELi4EEEElEENS0_12element_wise11PassThroughES26_S26_Li64ELi"
    "64ELi4ELi32ELi32ELi8ELi2ELi2ENSL_IJLi1ELi4ELi8ELi2EEEENSL_IJLi0ELi3ELi1ELi2EEEENSL_IJLi0ELi2ELi1ELi3EEEELi2ELi8E"
    "Li4ELb0ELb1ELi8ELi8ELi4ES27_S28_S29_Li2ELi8ELi4ELb0ELb1ELi8ELi8ELi4ELi1ELi1ELi8ENSL_IJLi1ELi16ELi1ELi4EEEELb1ELb"
    "1ELi1ELNS_15PipelineVersionE0EttEEtttS26_S26_S26_S14_S1Z_NS5_INS6_IJSC_SE_SE_NSH_INS6_IJiNS9_IiLi64EEEEEELb0EEES"
    "2F_EEENS6_IJSM_SN_SO_SP_SQ_EEENS6_IJSW_SP_SQ_NSL_IJLi5ELi6EEEENSL_IJLi7ELi8EEEEEEENSL_IJLi5ELi6ELi7ELi8EEEElEENS"
    "_38BlockToCTileMap_KSplit_M00_N00_M01_N01ILi64ELi64ES24_Lb0EEENS1_30ComputePtrOffsetOfStridedBatchILi1ELi1ELi0Ev"
    "EELb1EEEvPKT0_PKT1_PT2_T3_T4_T5_iT6_T7_T8_T9_T10_"
)
# TraceLens tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz
AITER_RMSNORM = (
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib"
)
# traceMap trace_file/examples/1_mi300x_1000isl_10osl_32con.pt.trace.json.gz
VLLM_FUSED_ADD_RMS_NORM = (
    "std::enable_if<(((8)>(0)))&&_typeConvert<c10::BFloat16>::exists, void>::type "
    "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, "
    "int, int)"
)
# TraceLens tests/traces/b200/eager_trace.json.gz
VLLM_RMS_NORM = (
    "void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*, c10::BFloat16 const*, long, long, long, long, "
    "long, c10::BFloat16 const*, float, int, int)"
)
# traceMap trace_file/examples/1_mi300x_1000isl_10osl_32con.pt.trace.json.gz
VLLM_ACT_AND_MUL = (
    "_ZN4vllm18act_and_mul_kernelIN3c108BFloat16ETnPFT_RKS3_EXadL_ZNS_11silu_kernelIS2_EES3_S5_EELb1EEEvPS3_PS4_i"
)
# TraceLens tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz
SGLANG_ACT_AND_MUL = (
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i"
)
# TraceLens tests/traces/b200/eager_trace.json.gz
VLLM_FP8_QUANT = (
    "void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, "
    "c10::BFloat16 const*, float const*, int, long, long)"
)
# traceMap trace_file/examples/1_mi300x_1000isl_10osl_32con.pt.trace.json.gz
VLLM_ROCM_PAGED_ATTENTION = (
    "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0, "
    "__hip_bfloat16, 16, 128, 256, false, 8>(__hip_bfloat16 const*, __hip_bfloat16 const*, __hip_bfloat16 const*, "
    "int, float, int const*, int const*, int const*, int, float const*, int, int, int, float*, float*, "
    "__hip_bfloat16*, __hip_bfloat16*, int, float const*, float const*, float const*)"
)
# DeepSeek profile-data train.json
DEEPEP_DISPATCH = (
    "void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*, float*, "
    "dpsk::ep::internode::SourceMeta*, int4 const*, float const*, long const*, float const*, int*, int*, int*, int*, "
    "int const*, int const*, int const*, int const*, int, int, int, int, int, bool const*, void*, int, int, void**, "
    "int, int, int, int, int*)"
)
# DeepSeek profile-data train.json
DPSK_TRANSPOSE = (
    "void dpsk::grouped_gemm::cuda::utils::transpose<512, 128, 4, 4>(unsigned char const*, unsigned char*, int, int, "
    "int, int)"
)
# HTA tests/data/negative_queue_length_values_check/rank0.json.gz
CUB_RADIX_SORT = (
    "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, "
    "int, int, int>(int*, int*, int*, int const*, long*, long const*, int*, int const*, int, int, int)"
)
# HTA tests/data/trace_diff/control/control.json.gz
FBGEMM_EMBEDDING = (
    "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, "
    "2ul>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, "
    "at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, "
    "at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<int, "
    "1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, "
    "at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, "
    "1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, long, "
    "at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float, "
    "2ul, at::RestrictPtrTraits, int>)"
)
# TraceLens tests/traces/b200/eager_trace.json.gz
TRTLLM_ROUTING = (
    "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_b"
    "float16, __nv_bfloat16, 128, false, true, true> >(moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloa"
    "t16, __nv_bfloat16, 128, false, true, true>)"
)


# --- checking one name ------------------------------------------------------------------------------------------


def case(name: str, family: str | None, kind: str | None, gemm: bool | None, details: dict | None = None,
         short: str | None = None, ops: tuple | None = None, math: str | None = None):
    """One name and what it decodes to; None leaves a field unchecked (see the module's docstring)."""
    label = name if len(name) <= 48 else name[:45] + "..."
    return pytest.param(name, family, kind, gemm, details or {}, short, ops, math, id=label)


FIELDS = "name, family, kind, gemm, details, short, ops, math"


def check(name, family, kind, gemm, details, short, ops, math):
    decoded = decode(name)
    assert decoded.name == name  # the trace's spelling, mangled or not: the diff compares names byte for byte
    if family is not None:
        assert decoded.family == family
    if kind is not None:
        assert kind_of_kernel(name) == kind
    if gemm is not None:
        assert decoded.is_gemm is gemm
    found = dict(decoded.details)
    for key, value in details.items():
        assert found.get(key) == value, (key, found)
    if short is not None:
        assert decoded.short == short
    if ops is not None:
        assert decoded.ops == ops
    if math is not None:
        assert math_unit(name) == math
    # Every short name fits a table cell's two lines, however long the name.
    assert 0 < len(decoded.short) <= SHORT_LIMIT


# --- cuBLAS -----------------------------------------------------------------------------------------------------

CUBLAS = [
    # TraceLens evals/unit_tests_nv/moe/moe_05_large_capacity.json.gz (B300, sm103): nvjet names the arch since sm90
    case("nvjet_sm103_tst_512x8_64x3_2x1_v_bz_NNT", "cuBLAS (nvjet)", GEMM, True,
         {"tile": "512x8", "k-block": "64 x 3 stages", "cluster": "2x1", "layout": "NNT"}, ops=("mm",)),
    # TraceLens tests/traces/b200/eager_trace.json.gz (B200): no arch in the name; the bias add runs in the epilogue
    case("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"tile": "64x64", "k-block": "64 x 16 stages", "cluster": "2x1", "epilogue": "bias in the epilogue",
          "layout": "TNT"}, short="nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", ops=("mm", "add")),
    # this suite's H200 traces: `h` is 16-bit inputs (tensor cores), coopA a cooperative schedule
    # this suite's H100 FP8 traces (torch 2.11, CUDA 13.0; docs/fp8.md): torch._scaled_mm's e4m3 GEMMs, one scale
    # per tensor (no token), rowwise (ovscale), 1 x 128 blocks on both operands, 128 x 128 weight tiles
    case("nvjet_sm90_qqtst_128x160_128x5_2x1_v_bz_coopA_algo2_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A and B)", "scales": "one per tensor (tensorwise)", "tile": "128x160"},
         math="tensor cores"),
    case("nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A and B)", "scales": "rowwise (one per row of A, one per column of B)"}),
    case("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_Avec128_Bvec128_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"scales": "both operands per 1 x 128 block (blockwise)"}),
    case("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_Ablk128_Bvec128_TNN", "cuBLAS (nvjet)", GEMM, True,
         {"scales": "cuBLAS's A per 128 x 128 block, cuBLAS's B per 1 x 128 block", "layout": "TNN"}),
    # torch._scaled_mm(e5m2, e4m3) and (e4m3, e5m2) on the same H100: `r` is e5m2, B's letter first
    case("nvjet_sm90_qrtst_24x64_128x16_4x2_h_bz_algo2_TNN", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e5m2 (A), e4m3 (B)"}),
    case("nvjet_sm90_rqtst_64x24_128x16_2x4_h_bz_algo2_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"inputs": "fp8 e4m3 (A), e5m2 (B)"}),
    case("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "cuBLAS (nvjet)", GEMM, True,
         {"arch": "sm90 (Hopper)", "tile": "256x128", "k-block": "64 x 4 stages", "cluster": "1x2",
          "inputs": "16-bit (fp16/bf16)", "schedule": "cooperative (coopA)", "layout": "TNT"}, math="tensor cores"),
    # HTA tests/data/df_index_resolver (V100) and trace_filter (A100): fp32 SGEMMs on the CUDA cores
    case("volta_sgemm_128x64_nt", "cuBLAS", GEMM, True,
         {"arch": "sm70 (Volta)", "dtype": "fp32", "tile": "128x64", "layout": "nt"}, math="CUDA cores"),
    case("ampere_sgemm_128x128_tn", "cuBLAS", GEMM, True,
         {"arch": "sm80 (Ampere)", "dtype": "fp32", "tile": "128x128", "layout": "tn"}, math="CUDA cores"),
    # TraceLens tests/traces/h100/google_owlv2...: 118 characters, cut to a cell with an ellipsis
    case(XMMA_GEMM, "cuBLAS (xmma)", GEMM, True,
         {"arch": "sm90 (Hopper)", "dtype": "bf16", "tile": "128x128x64", "layout": "tn"},
         short=XMMA_GEMM[:SHORT_LIMIT - 1] + "…"),
    # the second kernel of a split-K GEMM adds the partial sums: no GEMM itself
    case(SPLITK_REDUCE, "cuBLAS", REDUCTION, False, {"role": "adds a split-K GEMM's partial sums"},
         short="splitKreduce_kernel", ops=("split-K reduce",)),
    # cuBLAS's GEMV: a GEMM by the words of its name
    case(GEMV, None, GEMM, True, short="gemv2T_kernel_val<…>"),
]


@pytest.mark.parametrize(FIELDS, CUBLAS)
def test_cublas(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- CUTLASS ----------------------------------------------------------------------------------------------------

CUTLASS = [
    case(CUTLASS_RELU, "CUTLASS", GEMM, True,
         {"arch": "sm80 (Ampere)", "math": "tensor cores (mma)", "dtype": "bf16", "accumulate": "fp32",
          "tile": "64x64", "k-block": "64 x 4 stages", "layout": "tn", "alignment": "8 elements",
          "epilogue": "relu in the epilogue"},
         short="cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8", ops=("mm", "relu"),
         math="tensor cores"),
    case(CUTLASS_SIMT, "CUTLASS", GEMM, True,
         {"arch": "sm80 (Ampere)", "math": "CUDA cores (simt)", "tile": "128x32", "k-block": "8 x 5 stages",
          "layout": "nn"}, math="CUDA cores"),
    case(CUTLASS_WMMA_VOLTA, "CUTLASS", GEMM, True,
         {"arch": "sm70 (Volta)", "math": "tensor cores (wmma)", "dtype": "fp16", "tile": "32x32", "layout": "tn"}),
    # DeepSeek's FP8 grouped GEMM, a CUTLASS 3 kernel of their own: read from the C++ instantiation
    case(DPSK_GROUPED_GEMM, "CUTLASS", GEMM, True, {"instantiated by": "dpsk"}, short="CUTLASS grouped GEMM"),
]


@pytest.mark.parametrize(FIELDS, CUTLASS)
def test_cutlass(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- cuDNN ------------------------------------------------------------------------------------------------------

CUDNN = [
    case(CUDNN_BN_BACKWARD, "cuDNN", NORMALIZATION, False, {"what": "batch norm, backward"},
         short="bn_bw_1C11_kernel_new<…>"),
    case(CUDNN_BN_FORWARD, "cuDNN", NORMALIZATION, False, {"what": "batch norm, forward (training)"}),
    # the layout transform around a channels-last convolution: a copy, not a convolution
    case(CUDNN_NCHW_TO_NHWC, "cuDNN", COPY, False, {"what": "layout transform NCHW -> NHWC"},
         short="nchwToNhwcKernel<…>"),
    # mangled in the trace (1,644 characters): demangled to read it, kept mangled as the name
    case(CUDNN_CUTLASS_WGRAD, "cuDNN (CUTLASS)", CONVOLUTION, False, {"what": "convolution, weight gradient"},
         short="cuDNN CUTLASS implicit-GEMM conv wgrad", ops=("convolution",)),
    case(CUDNN_XMMA_FPROP, "cuDNN (xmma)", CONVOLUTION, False,
         {"what": "convolution, forward", "arch": "sm80 (Ampere)", "dtype": "tf32", "tile": "64x128x32",
          "layout": "NHWC"}, short="cuDNN conv fprop sm80 64x128x32"),
    # HTA tests/data/critical_path/alexnet (A100)
    case("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "cuDNN", CONVOLUTION, False,
         {"what": "convolution", "arch": "sm80 (Ampere)", "dtype": "fp32", "tile": "128x64",
          "epilogue": "ReLU in the epilogue"}),
    case("cudnn_infer_volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "cuDNN", CONVOLUTION, False,
         {"arch": "sm70 (Volta)", "dtype": "fp32"}),
    case(CUDNN_WINOGRAD, "cuDNN", CONVOLUTION, False, {"what": "Winograd convolution"}),
    case(CUDNN_OFFSETS, "cuDNN", CONVOLUTION, False, {"what": "convolution: index precomputation"},
         short="computeOffsetsKernel"),
    # this suite's H200 traces: cuDNN's own attention, generated for the problem
    case("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
         "cuDNN (generated)", ATTENTION, False,
         {"arch": "sm90 (Hopper)", "pass": "forward", "tile": "64x128x64", "cluster": "1x1x1"},
         short="cuDNN SDPA forward sm90 64x128x64", math="tensor cores"),
]


@pytest.mark.parametrize(FIELDS, CUDNN)
def test_cudnn(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- fused attention --------------------------------------------------------------------------------------------

ATTENTION_NAMES = [
    # traceMap's H100 vLLM trace: FlashAttention-3 inside CUTLASS's device_kernel<...>
    case(FA3_FWD, "FlashAttention-3", ATTENTION, False,
         {"pass": "forward", "arch": "sm90 (Hopper)",
          "tile": "64 query rows x 128 key/value columns, head dim 128", "dtype": "bf16"},
         short="FlashAttention-3 fwd sm90 64x128 hdim 128"),
    case(FA3_COMBINE, "FlashAttention-3", ATTENTION, False, {"role": "merges the split-KV partial outputs"},
         short="FlashAttention-3 combine"),
    # DeepSeek's training step: MLA's head dim 192 in the backward
    case(FA3_BWD, "FlashAttention-3", ATTENTION, False,
         {"pass": "backward", "tile": "64 query rows x 128 key/value columns, head dim 192", "dtype": "bf16"},
         short="FlashAttention-3 bwd sm90 64x128 hdim 192"),
    case(FA3_PREPROCESS, "FlashAttention-3", ATTENTION, False, short="FlashAttention-3 preprocess"),
    # this suite's H200 traces: PyTorch's vendored FlashAttention-2, its traits without a namespace
    case("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
         "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, "
         "false, false, true, false>(pytorch_flash::Flash_fwd_params)",
         "FlashAttention-2 (vendored in PyTorch)", ATTENTION, False,
         {"pass": "forward", "head dim": "64", "tile": "128 query rows x 128 key/value columns", "warps": "4",
          "dtype": "bf16"}, short="pytorch_flash::flash_fwd_kernel<64, 128x128, 4 warps>"),
    # the same kernel as TraceLens' H100 traces spell it (traits in pytorch_flash::): attention by its words
    case(FA2_NAMESPACED_TRAITS, None, ATTENTION, False),
    # FlashAttention-3's beta (DeepSeek's training step): attention by its words
    case(FA3_EARLY, None, ATTENTION, False),
    case("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
         "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
         "CUTLASS fused attention (SDPA memory-efficient, from xformers)", ATTENTION, False,
         {"pass": "forward", "dtype": "bf16", "tile": "64x64", "arch": "built for sm80 (Ampere)"},
         short="fmha_cutlassF_bf16_aligned_64x64_rf_sm80"),
    # Triton's attention on ROCm (TraceLens mi300 traces), and with rocprofiler-sdk's code-object suffix
    case("attn_fwd", None, ATTENTION, False, short="attn_fwd"),
    case("attn_fwd.kd", None, ATTENTION, False, short="attn_fwd"),
]


@pytest.mark.parametrize(FIELDS, ATTENTION_NAMES)
def test_attention(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- TensorRT-LLM -----------------------------------------------------------------------------------------------

TRTLLM = [
    # TraceLens' B200 vLLM trace (gpt-oss): a mixture of experts' batched GEMMs, MXFP4 weights x MXFP8 activations
    case("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
         "schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
         "TensorRT-LLM (generated)", GEMM, True,
         {"output": "MXFP8 e4m3", "inputs": "MXFP4 e2m1 x MXFP8 e4m3", "accumulate": "fp32", "tile": "128x16x256",
          "arch": "sm100 (Blackwell) (f: family-specific)"},
         short="TRT-LLM batched GEMM MXFP4 e2m1 x MXFP8 e4m3 t128x16x256", ops=("bmm",)),
    case("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_"
         "schedP2x1x2x3_biasM_bN_tmaOpt_clmp_dynBatch_sm100f",
         "TensorRT-LLM (generated)", GEMM, True, {"output": "bf16", "inputs": "MXFP4 e2m1 x MXFP8 e4m3"}),
    case("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
         "TensorRT-LLM (generated)", ATTENTION, False,
         {"arch": "sm100 (Blackwell)", "inputs": "fp8 e4m3", "output": "bf16", "head dim": "64",
          "pagedkv": "paged KV cache", "causal": "causal mask", "context": "context (prefill)"},
         short="TRT-LLM fmha sm100 fp8 e4m3 hdim 64"),
    # its MoE routing kernels, named by namespace (libraries.py)
    case(TRTLLM_ROUTING, "TensorRT-LLM", ROUTING, False, short="routingIndicesHistogramKernel<…>"),
]


@pytest.mark.parametrize(FIELDS, TRTLLM)
def test_trtllm(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- Triton -----------------------------------------------------------------------------------------------------

TRITON = [
    # traceMap's H100 vLLM trace (torch.compile'd Llama): x * rsqrt(mean(x²) + eps), an RMSNorm
    case("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "Inductor (Triton)", NORMALIZATION, False,
         {"kind": "reduction", "fuses": "_to_copy, add, mean, mul, pow, rsqrt"},
         ops=("_to_copy", "add", "mean", "mul", "pow", "rsqrt")),
    case("triton_poi_fused_mul_silu_1", "Inductor (Triton)", ELEMENTWISE, False, {"kind": "pointwise"},
         ops=("mul", "silu")),
    case("triton_poi_fused_cat_0", "Inductor (Triton)", COPY, False, ops=("cat",)),
    # TraceLens' xDiT Flux trace: a mean of squares, no rsqrt: a plain reduction
    case("triton_per_fused__to_copy_addmm_mean_pow_view_7", "Inductor (Triton)", REDUCTION, False,
         {"kind": "persistent reduction"}),
    # HTA tests/data/negative_queue_length_values_check: Inductor before torch 2.1 named no ops
    case("triton__0d1d2d", "Inductor (Triton, torch 2.0)", None, False,
         {"fuses": "not in the name before torch 2.1"}),
    # this suite's H200 traces: Liger-Kernel's GeGLU, and this suite's own fused GeGLU GEMM
    case("_geglu_tanh_forward_kernel", "Liger-Kernel (Triton)", ELEMENTWISE, False,
         {"op": "geglu_tanh", "pass": "forward"}),
    case("_geglu_gemm_tma_kernel", "profiling_in_pytorch (Triton)", GEMM, True, {"pass": "forward"},
         ops=("mm", "gelu", "mul")),
    # this suite's FP8 kernels (H100 traces of 10_fp8_mlp.py), and Inductor's kernel that prepares a _scaled_mm's input
    case("_fp8_geglu_gemm_kernel", "profiling_in_pytorch (Triton)", GEMM, True,
         {"dtype": "fp8 e4m3", "scales": "x per token, W per channel; m out per 1 x 128 block"}),
    case("_fp8_blockscaled_gemm_kernel", "profiling_in_pytorch (Triton)", GEMM, True, {"dtype": "fp8 e4m3"}),
    case("_quantize_rows_kernel", "profiling_in_pytorch (Triton)", None, False, {"scales": "rowwise (one per token)"}),
    case("triton_red_fused__scaled_mm__to_copy_abs_amax_clamp_clamp_min_div_gelu_mul_split_1", "Inductor (Triton)",
         None, False, ops=("_scaled_mm", "_to_copy", "abs", "amax", "clamp", "clamp_min", "div", "gelu", "mul",
                           "split")),
]


@pytest.mark.parametrize(FIELDS, TRITON)
def test_triton(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- ATen -------------------------------------------------------------------------------------------------------

ATEN = [
    case(ATEN_FILL, "ATen", COPY, False, {"op": "fill"}, short="vectorized_elementwise_kernel<fill>"),
    case(ATEN_GELU, "ATen", ELEMENTWISE, False, {"op": "gelu"}, short="vectorized_elementwise_kernel<gelu>"),
    # torch.optim's foreach AdamW: the in-place multiply of a list of tensors by a scalar
    case(ATEN_FOREACH_MUL, "ATen", OPTIMIZER, False, {"op": "_foreach_mul_"},
         short="multi_tensor_apply_kernel<_foreach_mul_>"),
    case(ATEN_MEAN, "ATen", REDUCTION, False, {"op": "mean"}, short="reduce_kernel<mean>"),
    case(ATEN_LAYER_NORM, "ATen", NORMALIZATION, False, {"op": "layer_norm"}),
    case(ATEN_SOFTMAX, "ATen", REDUCTION, False, {"op": "softmax"}, short="cunn_SoftMaxForward<softmax>"),
    case(ATEN_TOPK, "ATen", ROUTING, False, short="gatherTopK"),
    case(ATEN_INDEX_SELECT, "ATen", INDEXING, False, {"op": "index_select"}),
    case(ATEN_CAT, "ATen", COPY, False, {"op": "cat"}, short="CatArrayBatchedCopy<cat>"),
    case(ATEN_BN_STATS, "ATen", NORMALIZATION, False, short="batch_norm_collect_statistics_kernel<batch_norm>"),
    # rocprofiler-sdk's traces end a kernel's name with ` [clone .kd]`: the same kernel without it
    case(ATEN_ADD_CLONE_KD, "ATen", ELEMENTWISE, False, {"op": "add"}, short="vectorized_elementwise_kernel<add>"),
]


@pytest.mark.parametrize(FIELDS, ATEN)
def test_aten(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- NCCL, RCCL, symmetric memory -------------------------------------------------------------------------------

COLLECTIVES = [
    # traceMap's H100 vLLM trace (NCCL 2.19 on: op and type before algorithm and protocol)
    case("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "NCCL/RCCL",
         COMMUNICATION, False,
         {"collective": "AllReduce", "op": "Sum", "dtype": "bf16", "algorithm": "RING", "protocol": "LL"},
         short="ncclDevKernel_AllReduce_Sum_bf16_RING_LL", ops=("AllReduce",)),
    case("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "AllGather", "algorithm": "RING", "protocol": "LL"}),
    # RCCL on MI300X (traceMap's vLLM trace, TraceLens' DDP ResNet): the generic kernels say no collective
    case("ncclDevKernel_Generic_2(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False,
         short="ncclDevKernel_Generic_2"),
    case("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "NCCL/RCCL", COMMUNICATION, False),
    # HTA's test data: NCCL before 2.19, the C type last
    case("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "AllReduce", "op": "Sum", "dtype": "fp32", "algorithm": "RING", "protocol": "LL"}),
    case("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "NCCL/RCCL", COMMUNICATION, False,
         {"collective": "SendRecv", "protocol": "SIMPLE"}),
    # TraceLens' B200 vLLM trace: PyTorch's symmetric-memory all-reduce through NVLink multicast, no NCCL
    case(MULTIMEM_ALL_REDUCE, None, COMMUNICATION, False),
]


@pytest.mark.parametrize(FIELDS, COLLECTIVES)
def test_collectives(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


def test_nccl_fields():
    found = decode_nccl("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")
    assert (found.collective, found.op, found.dtype, found.algorithm, found.protocol) == (
        "AllReduce", "Sum", "bf16", "RING", "LL")
    assert not found.generic
    generic = decode_nccl("ncclDevKernel_Generic_2(ncclDevKernelArgsStorage<4096ul>)")
    assert generic.generic and generic.collective is None  # the launching op says which collective it ran
    assert decode_nccl("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)").dtype == "float"  # the trace's word
    assert decode_nccl(CUTLASS_RELU) is None


# --- AMD: Tensile, MIOpen, Composable Kernel, AITER -------------------------------------------------------------

AMD = [
    # TraceLens' xDiT Flux trace (MI300X): hipBLASLt's calling convention (UserArgs), bias in the epilogue, gfx942
    case(HIPBLASLT_GEMM, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"inputs": "bf16", "tile": "256x256x32", "math": "matrix cores (MFMA 16x16)", "layout": "TN",
          "epilogue": "bias in the epilogue", "arch": "gfx942, CDNA3, MI300X/MI325X"},
         short="hipBLASLt GEMM TN bf16 MT256x256x32 gfx942", ops=("mm",)),
    # TraceLens' hipBLASLt micro-benchmark: a GEMM split along K in two (GSU2), then the pass that adds the halves
    case(TENSILE_SPLIT_K_GEMM, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"layout": "NN", "split": "split-K (global split-U 2)", "arch": "gfx942, CDNA3, MI300X/MI325X"},
         short="Tensile GEMM NN bf16 MT256x128x64 gfx942"),
    case("Cijk_B_PostGSU2", "Tensile (rocBLAS/hipBLASLt)", REDUCTION, False,
         {"role": "adds a split-K (GSU) GEMM's partial sums"}, short="Tensile split-K reduce (PostGSU2)"),
    # traceMap's MI300X vLLM trace
    case("Cijk_SB_BiasS_HAS_ScaleAlphaVec_PostGSU4_VW4", "Tensile (rocBLAS/hipBLASLt)", REDUCTION, False,
         short="Tensile split-K reduce (PostGSU4)"),
    # HTA's MI250 trace: built for gfx90a
    case(HIPBLASLT_GFX90A, "Tensile (rocBLAS/hipBLASLt)", GEMM, True,
         {"tile": "64x16x32", "layout": "TN", "arch": "gfx90a, CDNA2, MI210/MI250"}),
    # TraceLens' normalization-layer test (MI300X)
    case("MIOpenBatchNormFwdTrainSpatial", "MIOpen", NORMALIZATION, False,
         short="MIOpen MIOpenBatchNormFwdTrainSpatial"),
    case("MIOpenBatchNormBwdSpatial", "MIOpen", NORMALIZATION, False),
    # TraceLens' DDP ResNet-18 (MI300X): MIOpen's implicit-GEMM convolutions and the transposes around them
    case(IGEMM_FWD, "MIOpen", CONVOLUTION, False,
         {"what": "implicit-GEMM convolution, forward", "layout": "NHWC", "dtype": "bf16", "tile": "128x128x32"},
         short="MIOpen igemm_fwd_nhwc_bf16_bt128x128x32"),
    case(IGEMM_WRW, "MIOpen", CONVOLUTION, False, {"what": "implicit-GEMM convolution, weight gradient"}),
    case("batched_transpose_32x32_half", "MIOpen", COPY, False, short="MIOpen batched_transpose_32x32_half"),
    case("SubTensorOpWithScalar1d", "MIOpen", ELEMENTWISE, False),
    # Composable Kernel, mangled in the traces: ck_tile's entry point says nothing, its first argument does
    case(CK_RMSNORM, "Composable Kernel", NORMALIZATION, False, short="CK Rmsnorm2dFwd<…>"),
    case(CK_GROUPED_CONV, "Composable Kernel", CONVOLUTION, False,
         short="CK kernel_grouped_conv_fwd_xdl_cshuffle_v3<…>"),
    case(CK_FMHA_PREFILL, "Composable Kernel", ATTENTION, False),
    # AITER, AMD's inference kernels: mangled, and plain
    case(AITER_RMSNORM, "AITER", NORMALIZATION, False, short="AITER add_rmsnorm_quant_kernel<…>"),
    case("aiter::fmha_fwd_hd128_bf16_rtz", "AITER", ATTENTION, False, short="AITER fmha_fwd_hd128_bf16_rtz"),
]


@pytest.mark.parametrize(FIELDS, AMD)
def test_amd(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


def test_gfx_in_tensile_names():
    assert gfx_in_name(HIPBLASLT_GEMM) == "gfx942"
    assert gfx_in_name(HIPBLASLT_GFX90A) == "gfx90a"
    assert gfx_in_name("Cijk_B_PostGSU2") is None  # the reduce pass names no ISA
    assert gfx_in_name(CUTLASS_RELU) is None
    assert gfx_label("gfx942") == "gfx942, CDNA3, MI300X/MI325X"
    assert gfx_label("gfx1234") == "gfx1234"  # unknown: the tag alone


# --- other libraries, by namespace ------------------------------------------------------------------------------

LIBRARIES = [
    # traceMap's MI300X vLLM trace: the return type `std::enable_if<...>::type` comes before the function
    case(VLLM_FUSED_ADD_RMS_NORM, "vLLM", NORMALIZATION, False, {"kernel": "fused_add_rms_norm_kernel"},
         short="fused_add_rms_norm_kernel<…>"),
    case(VLLM_RMS_NORM, "vLLM", NORMALIZATION, False, short="rms_norm_kernel<…>"),
    # mangled in ROCm traces: vLLM's and SGLang's SiLU-and-multiply
    case(VLLM_ACT_AND_MUL, "vLLM", ELEMENTWISE, False, short="act_and_mul_kernel<…>"),
    case(SGLANG_ACT_AND_MUL, "SGLang (sgl-kernel)", ELEMENTWISE, False, short="act_and_mul_kernel<…>"),
    case(VLLM_FP8_QUANT, "vLLM", ELEMENTWISE, False),
    case(VLLM_ROCM_PAGED_ATTENTION, "vLLM", ATTENTION, False),
    # DeepSeek's training step: DeepEP's dispatch is expert parallelism's all-to-all
    case(DEEPEP_DISPATCH, "DeepEP", COMMUNICATION, False, short="dispatch<…>"),
    case(DPSK_TRANSPOSE, "DeepSeek's kernels", COPY, False),
    case(CUB_RADIX_SORT, "CUB", ROUTING, False),
    # HTA's trace_diff data: a recommendation model's embedding tables
    case(FBGEMM_EMBEDDING, "FBGEMM", INDEXING, False),
]


@pytest.mark.parametrize(FIELDS, LIBRARIES)
def test_libraries(name, family, kind, gemm, details, short, ops, math):
    check(name, family, kind, gemm, details, short, ops, math)


# --- demangling -------------------------------------------------------------------------------------------------
# Expected strings are c++filt's (GNU binutils), run once by hand; the tests do not call it. Where this demangler
# spells a construct differently from c++filt, the expectation says how, and why that is no error.

CUTLASS_SYMBOL = "_ZN7cutlass6KernelI50cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4EEvNT_6ParamsE"
NCCL_SYMBOL = "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"
VLLM_SYMBOL = "_ZN4vllm15rms_norm_kernelIN3c108BFloat16ELi8ELi2EEEvPT_PKS3_lllllS6_fii"
FILL_SYMBOL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"


@pytest.mark.parametrize("symbol, expected", [
    (CUTLASS_SYMBOL, "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4>"
                     "(cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align4::Params)"),
    (NCCL_SYMBOL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    # the very name TraceLens' B200 trace carries for this kernel, demangled by CUPTI
    (VLLM_SYMBOL, VLLM_RMS_NORM),
])
def test_demangle_matches_cxxfilt(symbol, expected):
    assert demangle(symbol) == expected


def test_demangle_closes_nested_templates_without_a_space():
    # c++filt writes `std::array<char*, 1ul> >(int, ...)`, C++03's spelling; this demangler C++11's `>>`
    cxxfilt = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
               "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert demangle(FILL_SYMBOL) == cxxfilt.replace("> >", ">>")


def test_demangle_bf16():
    # `DF16b` is std::bfloat16_t to c++filt (C++23's name), __bf16 to this demangler (the compilers' type): the same
    cxxfilt = ("void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 64, 8, false, false, true, 1>"
               "(std::bfloat16_t*, std::bfloat16_t*, float*, std::bfloat16_t*, std::bfloat16_t*, std::bfloat16_t*, "
               "double, int, int, int, int, int, int, int, bool)")
    assert demangle(AITER_RMSNORM) == cxxfilt.replace("std::bfloat16_t", "__bf16")


def test_demangle_leaves_other_names_alone():
    assert demangle("attn_fwd") == "attn_fwd"
    assert demangle(CUTLASS_RELU) == CUTLASS_RELU  # demangled already
    assert demangle("_Z") == "_Z"  # not a symbol at all: unchanged, no exception
    assert demangle("_ZN3foo") == "foo(…)"  # a nested name cut before its end: what could be read of it


def test_demangle_a_truncated_symbol_quickly():
    # Traces cut long names (CUPTI, roctracer): the reader must stop at the end, not wait for a character that will
    # not come, and give back what it could read. 700 of Composable Kernel's 1,953 characters:
    cut = CK_BWD_WEIGHT[:700]
    start = time.perf_counter()
    found = demangle(cut)
    assert time.perf_counter() - start < 1.0
    assert found == "ck::tensor_operation::device::kernel_batched_gemm_xdlops_bwd_weight<…>(…)"
    assert decode(cut).short == "CK kernel_batched_gemm_xdlops_bwd_weight<…>"


def test_demangle_deep_nesting_returns():
    # thousands of nested template argument lists: the reader gives up (RecursionError caught), never raises
    symbol = "_ZN1a" + "1bI" * 3000 + "i" + "E" * 3000 + "Ev"
    start = time.perf_counter()
    assert isinstance(demangle(symbol), str)
    assert time.perf_counter() - start < 2.0


# --- naming the GPU ---------------------------------------------------------------------------------------------

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"


def test_gpu_nvidia_with_properties():
    properties = {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "warpSize": 32}
    assert gpu_label(properties, [NVJET], ["cudaLaunchKernel"]) == "NVIDIA H100 80GB HBM3 (sm90)"
    blackwell = {"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0}
    assert gpu_label(blackwell, [], []) == "NVIDIA B200 (sm100)"


def test_gpu_amd_mi300x_properties():
    # ROCm reports gfx942 as compute capability 9.4: not an sm
    properties = {"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "warpSize": 64}
    assert gpu_label(properties, [HIPBLASLT_GEMM], ["hipLaunchKernel"]) == (
        "AMD Instinct MI300X (gfx942, CDNA3, MI300X/MI325X)")


def test_gpu_amd_with_empty_name():
    # TraceLens' vLLM graph traces: an empty name, 9.4 and 64-wide wavefronts are all there is
    properties = {"name": "", "computeMajor": 9, "computeMinor": 4, "warpSize": 64}
    assert gpu_label(properties, [], []) == "an AMD GPU (gfx942, CDNA3, MI300X/MI325X)"
    # without warpSize, the HIP runtime's calls say AMD
    properties = {"name": "", "computeMajor": 9, "computeMinor": 4}
    assert gpu_label(properties, ["attn_fwd"], ["hipLaunchKernel"]) == "an AMD GPU (gfx942, CDNA3, MI300X/MI325X)"


def test_gpu_amd_by_kernel_names_where_the_name_says_nothing():
    # HTA's MI250 trace: "AMD Radeon Graphics", 9.0 (gfx908 or gfx90a): Tensile's ISA tag decides
    properties = {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64}
    assert gpu_label(properties, [HIPBLASLT_GFX90A], []) == (
        "AMD Radeon Graphics (gfx90a, CDNA2, MI210/MI250, inferred from kernel names)")


def test_gpu_without_properties():
    assert gpu_label({}, [NVJET], ["cudaLaunchKernel"]) == "an NVIDIA GPU (sm90 Hopper, inferred from kernel names)"
    assert gpu_label({}, ["volta_sgemm_128x64_nt", CUDNN_WINOGRAD], []) == (
        "an NVIDIA GPU (sm70 Volta, inferred from kernel names)")
    assert gpu_label({}, [HIPBLASLT_GEMM, "Cijk_B_PostGSU2"], ["hipExtModuleLaunchKernel"]) == (
        "an AMD GPU (gfx942, CDNA3, MI300X/MI325X, inferred from kernel names)")
    # GPU work whose names say no architecture is still GPU work
    assert gpu_label({}, ["attn_fwd"], ["cudaLaunchKernel"]) == (
        "an NVIDIA GPU (no device properties; its kernels do not name an architecture)")


def test_gpu_none_without_gpu_work():
    assert gpu_label({}, [], []) is None
    assert gpu_label({}, [], ["cudaGetDeviceCount"]) is None


# --- names whose words mislead one by one, read by what the kernel does ---------------------------------------------

MISLEADING = [
    # (name, kind, family or None to leave it unchecked, is_gemm)
    ("void vllm::cross_device_reduce_1stage<c10::BFloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, "
     "c10::BFloat16*, int, int)", "communication", "vLLM", False),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(long "
     "const*, __nv_bfloat16*, int)", "copy and memset", "vLLM", False),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, int)",
     "elementwise", "vLLM", False),
    ("void fbgemm_gpu::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, int, int, float*)", "elementwise",
     "FBGEMM", False),
    ("void at::to_dense_representation_kernel<float>(long, long, long const*, float const*, long const*, float*)",
     "copy and memset", None, False),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>("
     "cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)", "convolution",
     "CUTLASS (in cuDNN)", False),
    ("void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(cublasTransposeParams<float>, float const*, float*, float "
     "const*)", "elementwise", None, False),
    ("triton_poi_fused_addmm_gelu_view_15", "elementwise", "Inductor (Triton)", False),
    ("triton_poi_fused__scaled_dot_product_flash_attention_cat_transpose_view_10", "copy and memset",
     "Inductor (Triton)", False),
    ("triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_6", "normalization", "Inductor (Triton)",
     False),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution", "cuDNN", False),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
     "communication", "PyTorch symmetric memory", False),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true>("
     "pytorch_flash::Flash_fwd_params)", "attention", "FlashAttention-2 (vendored in PyTorch)", False),
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)0, "
     "__nv_bfloat16, 16, false>(int, int, __nv_bfloat16 const*, float const*, flashinfer::QuantizationSFLayout)",
     "elementwise", "TensorRT-LLM", False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::logical_and_kernel_cuda(at::TensorIterator&)::"
     "{lambda()#1}::operator()() const::{lambda(bool, bool)#1}, std::array<char*, 3ul> >(int, ...)", "elementwise",
     "ATen", False),
    ("void cub::DeviceCompactInitKernel<cub::ReduceByKeyScanTileState<int, int, true>, int*>(cub::ReduceByKeyScanTile"
     "State<int, int, true>, int, int*)", "other", "CUB", False),  # its name says nothing (no `act`): the op decides
]


@pytest.mark.parametrize("name, kind, family, gemm", MISLEADING, ids=[n[:50] for n, *_ in MISLEADING])
def test_misleading_words_give_the_right_kind(name, kind, family, gemm):
    decoded = decode(name)
    assert kind_of_kernel(name) == kind, decoded
    if family is not None:
        assert decoded.family == family
    assert decoded.is_gemm is gemm


def test_blackwell_sm103_and_an_empty_device_name_are_named():
    assert dict(decode("nvjet_sm103_tst_512x8_64x3_2x1_v_bz_NNT").details)["arch"] == "sm103 (Blackwell)"
    assert gpu_label({"name": "", "computeMajor": 9, "computeMinor": 0}, [], ["cudaLaunchKernel"]) == "an NVIDIA GPU (sm90)"


# --- Inductor's templates and library helpers: the class of work, not a name's first words ------------------------
# Inductor writes a template kernel (`triton_tem_fused_<ops>_<n>`) for a matrix product or one like it; the first op it
# names that is one says which, the ops after it are its epilogue. A FlexAttention causal forward and backward under
# torch.compile (H200, torch 2.11) ran `triton_tem_fused_flex_attention_0` and `..._backward_1`, 65% of its step.


@pytest.mark.parametrize("name, kind", [
    ("triton_tem_fused_flex_attention_0", ATTENTION),
    ("triton_tem_fused_flex_attention_backward_1", ATTENTION),
    ("triton_tem_fused_flex_decoding_2", ATTENTION),
    ("triton_tem_fused_mm_3", GEMM),
    ("triton_tem_fused_addmm_gelu_4", GEMM),  # the GELU is the epilogue
    ("triton_tem_fused_bmm_5", GEMM),
    ("triton_tem_fused__scaled_mm_6", GEMM),
    ("triton_tem_fused_convolution_7", CONVOLUTION),
    ("triton_tem_fused_convolution_relu_8", CONVOLUTION),
    ("triton_tem_fused_9", GEMM),  # a template names no op: Inductor's templates are products
    ("triton_poi_fused_addmm_gelu_10", ELEMENTWISE),  # a pointwise kernel after an addmm stays pointwise
])
def test_inductor_templates_by_the_product_they_fuse(name, kind):
    decoded = decode(name)
    assert decoded.inductor_kind == ("pointwise" if name.startswith("triton_poi_") else "template")
    assert kind_of_kernel(name) == kind
    assert kind_of_kernel(name, launched_by="aten::add") == kind  # the name commits: no op overrides it
    assert decoded.is_gemm is (kind == GEMM)


# cuDNN's SDPA backward (T5 fp16 AMP training, H200): helpers whose names say no work cuDNN is known for.
CUDNN_SDPA_HELPERS = (
    "void cudnn::fusion::compute_dot_do_o_specialized<__half, 128, 8>(cudnn::fusion::ComputeDotDoOParams)",
    "void cudnn::fusion::convert_dq_to_16bits<__half, float>(float const*, __half*, long, long, long, long, long)",
)


@pytest.mark.parametrize("name", CUDNN_SDPA_HELPERS)
def test_a_library_helper_is_the_kind_of_the_op_that_launched_it(name):
    assert decode(name).family == "cuDNN" and not decode(name).work
    assert kind_of_kernel(name, launched_by="aten::_cudnn_attention_backward") == ATTENTION
    assert kind_of_kernel(name, launched_by="aten::cudnn_convolution") == CONVOLUTION
    assert kind_of_kernel(name) == (ELEMENTWISE if "convert" in name else CONVOLUTION)  # no op: the library's kind


@pytest.mark.parametrize("name, kind", [
    # a helper whose words say what it does to memory keeps it, whichever op launched it
    ("void cudnn::ops::nhwcAddPaddingKernel<__nv_bfloat16, float, 32, 8, false>(cudnn::ops::nhwcAddPaddingParams)",
     COPY),
    ("void cudnn::cnn::im2col4d_kernel<float, int>(cudnn::cnn::im2col4d_params, int, int, int, float const*)",
     CONVOLUTION),
    ("void cudnn::engines_precompiled::tensorTransformGeneric<float, float, float, true, false, false>(float const*)",
     COPY),
])
def test_a_library_helper_that_names_its_work_keeps_it(name, kind):
    assert kind_of_kernel(name, launched_by="aten::_cudnn_attention_backward") == kind
