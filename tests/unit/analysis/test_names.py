"""Display names of kernels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.analysis.names import short_kernel_name


@pytest.mark.parametrize(("name", "short"), [
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
     "at::native::vectorized_elementwise_kernel<4, …>"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     "at::native::(anon)::cunn_SoftMaxForward<4, …>"),
    ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
     "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn…"),
])
def test_known_names(name: str, short: str) -> None:
    assert short_kernel_name(name) == short


@given(st.text(max_size=300), st.integers(2, 120))
def test_never_longer_than_width(name: str, width: int) -> None:
    assert len(short_kernel_name(name, width)) <= max(width, 1)


def test_cccl_versioned_namespaces_are_shortened() -> None:
    name = ("void CUB_200600_500_520_600_610_700_750_800_860_890_900_NS::DeviceReduceSingleTileKernel<"
            "CUB_200600_500_520_600_610_700_750_800_860_890_900_NS::DeviceReducePolicy<double, unsigned int, "
            "cuda::std::plus<double>>::Policy600, double*, double*, unsigned int, cuda::std::plus<double>, double, "
            "double>(double*, double*, unsigned int, cuda::std::plus<double>, double)")
    assert short_kernel_name(name) == "cub::DeviceReduceSingleTileKernel<…>"
    assert short_kernel_name("void cub::" + name[5:]) == "cub::DeviceReduceSingleTileKernel<…>"
