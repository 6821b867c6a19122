"""Display names of kernels: short, and never the same for two different kernels."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktrace.analysis.names import distinct_short_names, short_kernel_name

_CLOVER = (
    "void clover::par_ranged2d_kernel<{fn}(int, int, int, int, clover::Buffer2D<double> &, "
    "clover::Buffer2D<double> &)::[lambda(int, int) (instance {i})]>(clover::Range2d, T1)"
)
_TORCH_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<{t}>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<{t}>, std::array<char*, 3ul>)"
)
_SIGMOID = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)"
    "::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, "
    "std::array<char*, 2ul> >(int, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}"
    "::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "at::native::vectorized_elementwise_kernel<CUDAFunctor_add<float>>",
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllReduce_RING_LL_Sum_float",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
            "cunn_SoftMaxForward<float, float, float, SoftMaxForwardEpilogue>",
        ),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>"
            "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
            "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8",
        ),
        (_CLOVER.format(fn="PdV_kernel", i=2), "clover::par_ranged2d_kernel<PdV_kernel::lambda#2>"),
        (_SIGMOID, "vectorized_elementwise_kernel<sigmoid_kernel_cuda::lambda(BFloat16)>"),
    ],
)
def test_known_names(name: str, short: str) -> None:
    assert short_kernel_name(name, 70) == short


@given(st.text(max_size=300), st.integers(2, 120))
def test_never_longer_than_width(name: str, width: int) -> None:
    assert len(short_kernel_name(name, width)) <= max(width, 1)


def test_cccl_versioned_namespaces_are_shortened() -> None:
    name = (
        "void CUB_200600_500_520_600_610_700_750_800_860_890_900_NS::DeviceReduceSingleTileKernel<"
        "CUB_200600_500_520_600_610_700_750_800_860_890_900_NS::DeviceReducePolicy<double, unsigned int, "
        "cuda::std::plus<double>>::Policy600, double*, double*, unsigned int, cuda::std::plus<double>, double, "
        "double>(double*, double*, unsigned int, cuda::std::plus<double>, double)"
    )
    assert short_kernel_name(name, 40) == "DeviceReduceSingleTileKernel<DeviceRedu…"
    assert short_kernel_name("void cub::" + name[5:], 40) == short_kernel_name(name, 40)


def test_cloverleaf_lambdas_stay_apart_at_every_width() -> None:
    """13 of cloverleaf's top 15 kernels used to read `clover::par_ranged2d_kernel<…>`."""
    names = [
        _CLOVER.format(fn=fn, i=i) for fn in ("PdV_kernel", "advec_mom_kernel", "advec_cell_kernel") for i in (1, 2, 11)
    ]
    for width in (24, 32, 48, 80):
        shown = distinct_short_names(names, width)
        assert len(set(shown.values())) == len(names)
        assert all(len(s) <= width for s in shown.values())
    assert distinct_short_names(names, 52)[names[1]] == "clover::par_ranged2d_kernel<PdV_kernel::lambda#2>"
    assert distinct_short_names(names, 32)[names[4]] == "par…<advec_mom_kernel::lambda#2>"


def test_dtype_and_functor_tell_torch_kernels_apart() -> None:
    names = [_TORCH_ADD.format(t="float"), _TORCH_ADD.format(t="c10::BFloat16"), _SIGMOID]
    shown = distinct_short_names(names, 40)
    assert len(set(shown.values())) == 3
    assert "BFloat16" in shown[names[1]] and "float" in shown[names[0]]
    assert "sigmoid" in shown[names[2]]


@given(st.lists(st.text(max_size=80), max_size=12), st.integers(4, 70))
def test_distinct_names_never_collide(names: list[str], width: int) -> None:
    shown = distinct_short_names(names, width)
    assert set(shown) == set(names)
    assert len(set(shown.values())) == len(shown)
    assert all(len(s) <= width for s in shown.values())
