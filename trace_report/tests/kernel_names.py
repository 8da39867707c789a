"""Kernel names as real traces spell them, typed out byte for byte (long ones split over lines; the pieces join into
the name as the trace has it), each under a comment saying which public trace or fixture it comes from. The names
that test_kernel_families.py checks one field at a time and that several of its tests share."""

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
# torchvision's detection ops (Faster and Mask R-CNN: torchvision/csrc/ops/cuda/*_kernel.cu): no public trace of them
# at hand, so spelled from the source as CUPTI writes a kernel (`void`, namespaces, template arguments, parameter
# types with top-level const dropped), as ATen's kernels in the traces above are spelled.
TV_ROI_ALIGN = ("void vision::ops::(anonymous namespace)::roi_align_forward_kernel_impl<float>(int, float const*, "
                "float, int, int, int, int, int, int, bool, float const*, float*)")
TV_ROI_ALIGN_BACKWARD = ("void vision::ops::(anonymous namespace)::roi_align_backward_kernel_impl<float>(int, float "
                         "const*, float, int, int, int, int, int, int, bool, float*, float const*, int, int, int, int, "
                         "int)")
TV_ROI_POOL = ("void vision::ops::(anonymous namespace)::roi_pool_forward_kernel_impl<float>(int, float const*, float, "
               "int, int, int, int, int, float const*, float*, int*)")
TV_NMS = ("void vision::ops::(anonymous namespace)::nms_kernel_impl<float>(int, double, float const*, unsigned long "
          "long*)")
TV_DEFORM_IM2COL = ("void vision::ops::(anonymous namespace)::deformable_im2col_kernel<float>(int, float const*, float "
                    "const*, float const*, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, "
                    "bool, float*)")
# Apex's fused LayerNorm backward, spelled from apex/csrc/layer_norm_cuda_kernel.cu as above (its template<T, U> form,
# fp16 with fp32 statistics); Megatron and others carry copies of the same kernels
APEX_LN_GRAD_INPUT = ("void cuComputeGradInput<c10::Half, float>(c10::Half const*, c10::Half const*, int, int, float "
                      "const*, float const*, float, c10::Half const*, c10::Half*)")
APEX_LN_GAMMA_BETA = ("void cuComputePartGradGammaBeta<c10::Half, float>(c10::Half const*, c10::Half const*, int, int, "
                      "float const*, float const*, float, float*, float*)")
