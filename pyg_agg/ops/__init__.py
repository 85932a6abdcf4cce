"""Scatter/segment kernels and backend dispatch: every aggregation in
pyg_agg goes through here."""
from pyg_agg.ops.backend import (
    BACKENDS,
    HAS_TORCH_SCATTER,
    HAS_TORCH_SPARSE,
    get_backend,
    resolve_backend,
    use_backend,
)
from pyg_agg.ops.checks import check_index, check_ptr, set_validation
from pyg_agg.ops.multi import STATISTICS, multi_aggregate, segment_statistics
from pyg_agg.ops.native import HAS_NATIVE, HAS_TRITON
from pyg_agg.ops.scatter import scatter, segment_counts
from pyg_agg.ops.segment import index_to_ptr, ptr_to_index, segment
from pyg_agg.ops.softmax import scatter_softmax

__all__ = [
    "BACKENDS",
    "HAS_NATIVE",
    "HAS_TORCH_SCATTER",
    "HAS_TORCH_SPARSE",
    "HAS_TRITON",
    "STATISTICS",
    "check_index",
    "check_ptr",
    "get_backend",
    "index_to_ptr",
    "multi_aggregate",
    "ptr_to_index",
    "resolve_backend",
    "scatter",
    "scatter_softmax",
    "segment",
    "segment_counts",
    "segment_statistics",
    "set_validation",
    "use_backend",
]
