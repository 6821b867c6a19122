"""The synthetic job's shape (SyntheticConfig), the kernel names it draws from, and a rank's running state."""

from __future__ import annotations

from dataclasses import dataclass

# (name, mean duration µs, phase weight fwd/bwd/opt, stream role) — names as real traces show them.
KERNEL_CATALOGUE: tuple[tuple[str, float], ...] = (
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", 180.0),
    ("ampere_sgemm_128x64_nn", 240.0),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
        150.0,
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_"
        "kernel__5x_cublas",
        120.0,
    ),
    (
        "void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, float, float, float, true, false, 0, 0, 0>"
        "(cudnnTensorStruct, float const*, cudnnFilterStruct, float const*, cudnnConvolutionStruct, cudnnTensorStruct, "
        "float*, float, float, cudnn::reduced_divisor, int)",
        90.0,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        6.0,
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
        "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::"
        "{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl("
        "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::"
        "operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
        9.0,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper<float>, "
        "unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper<float>, unsigned int, float, 4>)",
        12.0,
    ),
    ("triton_poi_fused_add_mul_0", 4.0),
    ("triton_red_fused_native_layer_norm_1", 11.0),
    (
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false>"
        "(Flash_fwd_params)",
        70.0,
    ),
    (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>, float*, float, "
        "float, float, float, float, float, float, bool, bool>",
        35.0,
    ),
)
NCCL_KERNELS = (
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
)
_T0 = 1_700_000_000_000_000_000


@dataclass(frozen=True)
class SyntheticConfig:
    """Shape of the synthetic job."""

    steps: int = 20
    """Training steps after the init phase."""
    kernels_per_step: int = 200
    """Compute kernels per step (plus NCCL kernels when ranks > 1)."""
    streams: int = 2
    """Compute streams, 1-4; with ranks > 1 a communication stream is added."""
    ranks: int = 1
    nodes: int = 1
    seed: int = 0
    init_ns: int = 2_000_000_000
    """Length of the initialization phase before the first step."""
    finalize_ns: int = 300_000_000
    """Length of the finalization phase after the last step."""
    pageable_fraction: float = 0.3
    """Share of per-step HtoD copies from pageable (not pinned) host memory."""
    counter_interval_ns: int = 500_000_000
    slow_step_every: int = 0
    """If > 0, every n-th step waits on a slow data loader (a host stall)."""
    start_ns: int = _T0


@dataclass
class RankState:
    """What a rank's batches carry on: the CPU clock and the next correlation id."""

    cpu_ns: int
    corr: int
