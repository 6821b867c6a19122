"""Kernel precision: classify kernel names to FP64/FP32/TF32/BF16/FP16/FP8/INT8/INT32/INT64, and its distribution.

The classifier reads the naming conventions of cuBLAS/cuBLASLt (``sm90_xmma_gemm_bf16bf16_bf16f32``,
``volta_sgemm``, ``ampere_gcgemm``), CUTLASS (``cutlass_80_tensorop_s1688gemm`` = TF32 on Ampere,
``..._bf16_s16816gemm``), cuDNN (``scudnn``, ``..._tf32f32_...``), FlashAttention (``cutlass::bfloat16_t``),
CuPy (``cupy_multiply__float64_float64_float64``) and the C++ template arguments of PyTorch/CUB kernels
(``<c10::BFloat16>``, ``{lambda(float)#1}``, ``<double>``, ``<long>``).

Rules, in order (shared/reference/analyses.md §7):

1. communication kernels (NCCL/RCCL collectives, custom all-reduce) are set apart as ``communication``:
   their ``int8_t``/``float`` suffix is the wire type of a data movement, not compute precision;
   ``Memcpy``/``Memset`` kernels are set apart as ``memory``;
2. a library precision token decides: FP8 (``e4m3``/``e5m2``) > INT8 tensor ops (``imma``, ``i8816``) >
   BF16 and FP16 together = ``mixed`` > BF16 > FP16 > TF32 (``tf32``; ``s1688`` tensor-op GEMMs on
   sm80+) > FP64 (``dgemm``, ``float64``) > FP32 (``sgemm``, ``scudnn``, ``cgemm``, ``float32``);
3. otherwise the C++ type arguments: a 16-bit float type wins over ``float`` (it is the storage type,
   ``float`` is the accumulator); ``double`` wins over ``float`` only when it occurs more often (scalar
   ``double`` parameters of a ``float`` kernel are common); integer types count only in a data position
   (``<long>``, ``{lambda(int)#1}``), 64-bit before 32-bit;
4. anything else is ``unknown`` (Triton ``triton_poi_fused_*``, CloverLeaf lambdas, ``OpaqueType<4>``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import polars as pl

from ktrace.analysis.index import TraceIndex
from ktrace.analysis.kernels import kernel_stats
from ktrace.model.trace import Trace

PRECISIONS: tuple[str, ...] = (
    "FP64",
    "FP32",
    "TF32",
    "BF16",
    "FP16",
    "FP8",
    "INT64",
    "INT32",
    "INT8",
    "mixed",
    "unknown",
)
"""Compute precision classes, in display order."""
EXCLUDED: tuple[str, ...] = ("communication", "memory")
"""Classes shown apart: not compute, so not part of the precision shares."""
ALL_CLASSES: tuple[str, ...] = PRECISIONS + EXCLUDED

_COMM = (
    r"(?i)^(void )?(nccl|rccl)|nccldevkernel|ncclkernel|cross_device_reduce|allreduce|all_reduce|"
    r"allgather|all_gather|reduce_scatter|reducescatter|alltoall|all_to_all|nvshmem|userbuffers"
)
_MEMORY = r"(?i)^(memcpy|memset)\b"

# Library tokens (matched on the lower-cased name).
_FP8 = r"e4m3|e5m2|fp8|float8|f8f8|__nv_fp8"
_INT8_LIB = r"imma|i8816|i16832|i8i8|s8s8|u8s8|int8gemm|igemm|int8_t"
_BF16 = r"bf16|bfloat16"
_FP16 = r"(^|[^b])f16|fp16|(^|[^b])float16|c10::half|__half|\bhalf\b|half_t|h884|h1688|h16816|hmma|hgemm|_h\d{3,5}gemm"
_TF32 = r"tf32|tfloat32"
_TF32_TENSOROP = r"s1688(gemm|fprop|dgrad|wgrad)|_s1688"
_PRE_AMPERE = r"turing|volta|sm75|sm70|cutlass_75|cutlass_70"
_FP64_LIB = r"(^|[_ ])(dgemm|zgemm|dgemv)|dmma|d884|float64|_f64"
_FP32_LIB = r"(^|[_ ])(sgemm|sgemv|g?cgemm|ssyrk|strsm)|_scudnn|float32"

# C++ type tokens.
_DOUBLE = r"\bdouble\b"
_FLOAT = r"\bfloat\d?\b"
_NOISE = (
    r"std::array<[^>]*>|array<char\*, ?\d+u?l?>|tensorsizestride<[^>]*>|arrayref<[^>]*>|"
    r"offsetcalculator<[^>]*>|const&\)::\{lambda\(int\)#\d+\}"
)
"""Index-type template arguments that say nothing about the data type (removed before the integer rules)."""
_INT64 = r"(<|\{lambda\()(long|int64_t|unsigned long|long long)[*]?[,>)]|<long\*"
_INT32 = r"(<|\{lambda\()(int|int32_t|unsigned int)[*]?[,>)]"
_INT8_T = r"(<|\{lambda\()(int8_t|uint8_t|signed char|unsigned char)[,>)]"


def _has(pattern: str) -> pl.Expr:
    return pl.col("_lower").str.contains(pattern)


def _count(pattern: str) -> pl.Expr:
    return pl.col("_lower").str.count_matches(pattern)


def _class_expr() -> pl.Expr:
    """The ordered rule chain as one polars expression over the lower-cased name column `_lower`."""
    bf16, fp16 = _has(_BF16), _has(_FP16)
    doubles, floats = _count(_DOUBLE), _count(_FLOAT)
    expr = (
        pl.when(pl.col("name").str.contains(_COMM))
        .then(pl.lit("communication"))
        .when(pl.col("name").str.contains(_MEMORY))
        .then(pl.lit("memory"))
        .when(_has(_FP8))
        .then(pl.lit("FP8"))
        .when(_has(_INT8_LIB) & ~bf16 & ~fp16 & (floats == 0))
        .then(pl.lit("INT8"))
        .when(bf16 & fp16)
        .then(pl.lit("mixed"))
        .when(bf16)
        .then(pl.lit("BF16"))
        .when(fp16)
        .then(pl.lit("FP16"))
        .when(_has(_TF32))
        .then(pl.lit("TF32"))
        .when(_has(_TF32_TENSOROP) & _has(_PRE_AMPERE))
        .then(pl.lit("FP16"))
        .when(_has(_TF32_TENSOROP))
        .then(pl.lit("TF32"))
        .when(_has(_FP64_LIB))
        .then(pl.lit("FP64"))
        .when(_has(_FP32_LIB))
        .then(pl.lit("FP32"))
        .when(doubles > floats)
        .then(pl.lit("FP64"))
        .when(floats > 0)
        .then(pl.lit("FP32"))
        .when(pl.col("_clean").str.contains(_INT64))
        .then(pl.lit("INT64"))
        .when(pl.col("_clean").str.contains(_INT32))
        .then(pl.lit("INT32"))
        .when(pl.col("_clean").str.contains(_INT8_T))
        .then(pl.lit("INT8"))
        .otherwise(pl.lit("unknown"))
    )
    return expr


MEMO_NAMES = 4096
"""Distinct-name sets up to this size are classified once per process (classify_names_memo): a fleet task runs the
per-rank analyses on each of its ranks' traces, which hold the same few hundred names, and building the classifier's
expression costs ~4 ms a call."""


def classify_names(names: Iterable[str] | pl.Series) -> pl.DataFrame:
    """Classify kernel names; each distinct name is classified once.

    Args:
        names: kernel names (duplicates allowed).

    Returns:
        A frame ``name`` (String), ``precision`` (String, one of ALL_CLASSES), one row per distinct name,
        sorted by name.
    """
    series = names if isinstance(names, pl.Series) else pl.Series("name", list(names), dtype=pl.String)
    distinct = series.cast(pl.String).unique().sort()
    if distinct.len() <= MEMO_NAMES:
        return _classified(tuple(distinct.to_list()))
    return _classify(pl.DataFrame({"name": distinct}))


@functools.lru_cache(maxsize=64)
def _classified(names: tuple[str | None, ...]) -> pl.DataFrame:
    return _classify(pl.DataFrame({"name": pl.Series("name", names, dtype=pl.String)}))


def _classify(frame: pl.DataFrame) -> pl.DataFrame:
    lower = pl.col("name").str.to_lowercase()
    return (
        frame.with_columns(_lower=lower)
        .with_columns(_clean=pl.col("_lower").str.replace_all(_NOISE, ""))
        .select("name", _class_expr().alias("precision"))
    )


def classify_name(name: str) -> str:
    """The precision class of one kernel name (convenience wrapper of classify_names)."""
    return str(classify_names([name])["precision"][0])


def kernel_precisions(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Per distinct kernel name: count, total GPU time and precision class.

    Returns:
        ``name``, ``precision``, ``count`` (int), ``time_ns`` (int), sorted by time descending.
    """
    per_name = kernel_stats(trace, index=index).select("name", "count", time_ns="total_ns")
    classes = classify_names(per_name["name"])
    return (
        per_name.join(classes, on="name", how="left")
        .select("name", "precision", pl.col("count").cast(pl.Int64), pl.col("time_ns").cast(pl.Int64))
        .sort(["time_ns", "name"], descending=[True, False])
    )


def precision_distribution(trace: Trace, *, index: TraceIndex | None = None) -> pl.DataFrame:
    """Kernel precision distribution by GPU time and by launch count.

    Communication and memory kernels get their own rows with ``excluded`` true; the shares of the
    compute classes are over compute kernels only (excluded rows carry their share of all kernel time).

    Returns:
        ``precision``, ``excluded`` (bool), ``kernels`` (count), ``time_ns``, ``time_share``,
        ``count_share`` (0-1), one row per class present, in the order of ALL_CLASSES.
    """
    return distribution_of(kernel_precisions(trace, index=index))


def distribution_of(per_name: pl.DataFrame) -> pl.DataFrame:
    """precision_distribution from kernel_precisions' frame (``precision``, ``count``, ``time_ns`` per name; the
    fleet reduce passes the whole job's, summed over ranks)."""
    by_class = per_name.group_by("precision").agg(kernels=pl.col("count").sum(), time_ns=pl.col("time_ns").sum())
    order = pl.DataFrame({"precision": list(ALL_CLASSES), "_order": list(range(len(ALL_CLASSES)))})
    by_class = by_class.join(order, on="precision").sort("_order").drop("_order")
    excluded = pl.col("precision").is_in(list(EXCLUDED))
    compute = by_class.filter(~excluded)
    compute_time = max(int(compute["time_ns"].sum()), 1)
    compute_count = max(int(compute["kernels"].sum()), 1)
    all_time = max(int(by_class["time_ns"].sum()), 1)
    all_count = max(int(by_class["kernels"].sum()), 1)
    return by_class.select(
        "precision",
        excluded.alias("excluded"),
        pl.col("kernels").cast(pl.Int64),
        pl.col("time_ns").cast(pl.Int64),
        pl.when(excluded)
        .then(pl.col("time_ns") / all_time)
        .otherwise(pl.col("time_ns") / compute_time)
        .alias("time_share"),
        pl.when(excluded)
        .then(pl.col("kernels") / all_count)
        .otherwise(pl.col("kernels") / compute_count)
        .alias("count_share"),
    )
