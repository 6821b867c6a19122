"""op_cost against hand-computed FLOPs and bytes (a multiply-add is 2 FLOPs; bytes = inputs read + output written)."""

from __future__ import annotations

import pytest

from ktrace.analysis.op_cost import Call, OpCost, attention_flops, causal_pairs, matmul_shapes, op_cost

F32, BF16 = "float", "c10::BFloat16"


def test_mm_counts_two_flops_per_multiply_add_and_reads_both_operands_writes_the_output() -> None:
    # [4, 8] x [8, 16]: 2*4*16*8 = 1024 FLOPs; (32 + 128 + 64) floats of 4 bytes = 896 bytes
    assert op_cost("aten::mm", Call([[4, 8], [8, 16]], [F32, F32])) == OpCost(1024, 896, "fp32")


def test_addmm_adds_one_flop_per_output_and_reads_the_bias() -> None:
    # resnet50's classifier: bias [1000], [32, 2048] x [2048, 1000]
    cost = op_cost("aten::addmm", Call([[1000], [32, 2048], [2048, 1000], [], []], [F32, F32, F32, "Int", "Int"]))
    assert cost == OpCost(2 * 32 * 1000 * 2048 + 32 * 1000, (32 * 2048 + 2048 * 1000 + 32 * 1000 + 1000) * 4, "fp32")


def test_bmm_and_baddbmm_multiply_by_the_batch() -> None:
    assert op_cost("aten::bmm", Call([[3, 2, 5], [3, 5, 7]], [BF16, BF16])) == OpCost(
        3 * 2 * 2 * 7 * 5, 3 * (10 + 35 + 14) * 2, "bf16"
    )
    cost = op_cost("aten::baddbmm", Call([[3, 2, 7], [3, 2, 5], [3, 5, 7], [], []], [BF16, BF16, BF16, "", ""]))
    assert cost == OpCost(3 * 2 * 2 * 7 * 5 + 3 * 2 * 7, (3 * (10 + 35 + 14) + 42) * 2, "bf16")


def test_matmul_broadcasts_the_batch_and_promotes_vectors() -> None:
    assert matmul_shapes([2, 1, 4, 8], [3, 8, 5]) == (6, 4, 5, 8)
    assert matmul_shapes([8], [8, 5]) == (1, 1, 5, 8)
    assert matmul_shapes([4, 8], [9, 5]) is None
    # [6, 4, 8] x [8, 5]: 6 products of 2*4*5*8 = 320; bytes (192 + 40 + 6*20) * 4
    assert op_cost("aten::matmul", Call([[6, 4, 8], [8, 5]], [F32, F32])) == OpCost(
        6 * 320, (192 + 40 + 120) * 4, "fp32"
    )


def test_linear_with_and_without_bias() -> None:
    # x [2, 3, 8] -> M = 6, weight [16, 8]: N = 16, K = 8
    plain = op_cost("aten::linear", Call([[2, 3, 8], [16, 8], []], [BF16, BF16, ""]))
    assert plain == OpCost(2 * 6 * 16 * 8, (48 + 128 + 96) * 2, "bf16")
    biased = op_cost("aten::linear", Call([[2, 3, 8], [16, 8], [16]], [BF16, BF16, BF16]))
    assert biased == OpCost(2 * 6 * 16 * 8 + 6 * 16, (48 + 128 + 96 + 16) * 2, "bf16")


def test_convolution_forward_needs_stride_and_padding_from_the_concrete_inputs() -> None:
    dims = [[1, 3, 1008, 1008], [1024, 3, 14, 14], [], [], [], [], [], [], []]
    types = [BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"]
    concrete = ["", "", "[0, 0]", "[14, 14]", "[1, 1]", "1", "False", "False", "True"]
    # owlv2's patch embedding: output [1, 1024, 72, 72]; 2 * 5 308 416 outputs * (3 * 14 * 14) = 6 242 697 216
    out = 1024 * 72 * 72
    cost = op_cost("aten::cudnn_convolution", Call(dims, types, concrete))
    assert cost == OpCost(2 * out * 588, (3 * 1008 * 1008 + 1024 * 588 + out) * 2, "bf16")
    assert op_cost("aten::cudnn_convolution", Call(dims, types)) is None  # no Concrete Inputs: no model, no guess


def test_convolution_forward_with_padding_dilation_and_bias() -> None:
    dims = [[2, 4, 10, 10], [8, 4, 3, 3], [8], [], [], [], [], [], []]
    types = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"]
    concrete = ["", "", "", "[2, 2]", "[2, 2]", "[2, 2]", "False", "[0, 0]", "1"]
    # (10 + 4 - 2*2 - 1) // 2 + 1 = 5: output [2, 8, 5, 5] = 400 elements, 36 MACs each, + 400 bias adds
    cost = op_cost("aten::convolution", Call(dims, types, concrete))
    assert cost == OpCost(2 * 400 * 36 + 400, (800 + 288 + 400 + 8) * 4, "fp32")
    transposed = [*concrete[:6], "True", *concrete[7:]]
    assert op_cost("aten::convolution", Call(dims, types, transposed)) is None


def test_convolution_backward_counts_one_forward_per_gradient_asked_for() -> None:
    dims = [[2, 8, 5, 5], [2, 4, 10, 10], [8, 4, 3, 3], [], [], [], [], [], [], [], []]
    types = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Int", ""]
    both = ["", "", "", "[8]", "[2, 2]", "[2, 2]", "[2, 2]", "False", "[0, 0]", "1", "[True, True, False]"]
    reads = (400 + 800 + 288) * 4
    assert op_cost("aten::convolution_backward", Call(dims, types, both)) == OpCost(2 * 28800, reads + 1088 * 4, "fp32")
    weight_only = [*both[:10], "[False, True, False]"]
    assert op_cost("aten::convolution_backward", Call(dims, types, weight_only)) == OpCost(
        28800, reads + 288 * 4, "fp32"
    )


def test_cudnn_backward_input_has_flops_without_concrete_inputs_but_no_bytes() -> None:
    dims = [[], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], []]
    types = ["GenericList", F32, F32, "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool"]
    assert op_cost("aten::cudnn_convolution_backward_input", Call(dims, types)) == OpCost(
        2 * 32 * 2048 * 49 * 512, None, "fp32"
    )


def test_causal_pairs_keep_the_lower_triangle_aligned_top_left() -> None:
    assert causal_pairs(4, 4) == 10  # 1 + 2 + 3 + 4
    assert causal_pairs(2, 5) == 3  # 1 + 2
    assert causal_pairs(5, 2) == 1 + 2 + 2 + 2 + 2
    assert attention_flops(1, 4, 4, 8, 8, causal=False) == 2 * 16 * 16
    assert attention_flops(1, 4, 4, 8, 8, causal=True) == 2 * 10 * 16


@pytest.mark.parametrize(
    ("name", "concrete", "heads_first"),
    [
        ("aten::scaled_dot_product_attention", ["", "", "", "", "0.0", "True", "", "False"], True),
        ("aten::_scaled_dot_product_flash_attention", ["", "", "", "0.0", "True", "False", ""], True),
        ("aten::_flash_attention_forward", ["", "", "", "", "", "128", "128", "0.0", "True", "False", ""], False),
    ],
)
def test_attention_forward_reads_the_causal_flag_and_layout(name: str, concrete: list[str], heads_first: bool) -> None:
    shape = [2, 4, 128, 64] if heads_first else [2, 128, 4, 64]
    call = Call([shape, shape, shape], [BF16, BF16, BF16], concrete)
    per_head = 2 * (128 * 129 // 2) * (64 + 64)
    assert op_cost(name, call) == OpCost(8 * per_head, 4 * 2 * 4 * 128 * 64 * 2, "bf16")
    assert op_cost(name, Call([shape, shape, shape], [BF16, BF16, BF16])) is None  # causal unknown: no model


def test_attention_backward_is_two_and_a_half_forwards() -> None:
    q = [1, 2, 16, 8]
    concrete = [""] * 11 + ["False"]
    call = Call([q, q, q, q, q], [BF16] * 5, concrete)
    forward = 2 * 2 * 16 * 16 * 16
    assert op_cost("aten::_scaled_dot_product_flash_attention_backward", call) == OpCost(
        int(forward * 2.5), 2 * 4 * 256 * 2, "bf16"
    )


def test_bytes_only_models() -> None:
    # add [8, 4] + [4] broadcast: reads 32 + 4 floats, writes 32
    assert op_cost("aten::add", Call([[8, 4], [4], []], [F32, F32, "Scalar"])) == OpCost(0, (32 + 4 + 32) * 4, "fp32")
    assert op_cost("aten::native_layer_norm", Call([[8, 4], [], [4], [4], []], [BF16, "", BF16, BF16, ""])) == OpCost(
        0, (32 + 4 + 4 + 32) * 2, "bf16"
    )
    assert op_cost("aten::sum", Call([[8, 4], [], []], [F32, "", ""])) == OpCost(0, 128, "fp32")
    assert op_cost("aten::copy_", Call([[8, 4], [8, 4], []], [BF16, F32, ""])) == OpCost(0, 2 * 128, "bf16")
    # embedding [100, 16] by 10 long indices: reads 80 index bytes + 10 rows of 64 bytes, writes the rows
    assert op_cost("aten::embedding", Call([[100, 16], [10]], [F32, "long int"])) == OpCost(0, 80 + 2 * 640, "fp32")


def test_no_model_is_none_not_a_guess() -> None:
    assert op_cost("aten::cat", Call([[], []], ["TensorList", "Int"])) is None
    assert op_cost("my::custom_op", Call([[4, 4]], [F32])) is None
    assert op_cost("aten::mm", Call([[4, 8], [8, 16]], ["", ""])) is None  # no dtypes


def test_a_zero_stride_or_an_empty_output_is_no_model_not_a_crash() -> None:
    dims = [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], [], [], []]
    types = [F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"]
    assert op_cost("aten::cudnn_convolution", Call(dims, types, ["", "", "[0, 0]", "[0, 0]", "[1, 1]"])) is None
    assert (
        op_cost(
            "aten::cudnn_convolution", Call([[1, 3, 2, 2], *dims[1:]], types, ["", "", "[0, 0]", "[1, 1]", "[1, 1]"])
        )
        is None
    )
