"""Scatter/segment kernels and backend dispatch: every aggregation in
pyg_agg goes through here."""
from pyg_agg.ops.attention import dynamic_attention
from pyg_agg.ops.backend import (
    BACKENDS,
    HAS_TORCH_SCATTER,
    HAS_TORCH_SPARSE,
    get_backend,
    resolve_backend,
    use_backend,
)
from pyg_agg.ops.checks import check_index, check_ptr, set_validation
from pyg_agg.ops.graph import (
    CSRGraph,
    DegreeGroups,
    Edges,
    degree_groups,
    read_edges,
    sort_segments,
    target_csr,
)
from pyg_agg.ops.lcm_tree import SegmentLayout, TreeLevel, balanced_tree_reduce, tree_level
from pyg_agg.ops.multi import (
    STATISTICS,
    multi_aggregate,
    scale_stacked,
    segment_statistics,
    stacked_multi_aggregate,
    stacked_statistics,
)
from pyg_agg.ops.native import HAS_NATIVE, HAS_TRITON
from pyg_agg.ops.scatter import scatter, segment_counts
from pyg_agg.ops.segment import index_to_ptr, ptr_to_index, segment
from pyg_agg.ops.softmax import scatter_softmax

__all__ = [
    "BACKENDS",
    "CSRGraph",
    "DegreeGroups",
    "Edges",
    "HAS_NATIVE",
    "HAS_TORCH_SCATTER",
    "HAS_TORCH_SPARSE",
    "HAS_TRITON",
    "STATISTICS",
    "SegmentLayout",
    "TreeLevel",
    "balanced_tree_reduce",
    "check_index",
    "check_ptr",
    "degree_groups",
    "dynamic_attention",
    "get_backend",
    "index_to_ptr",
    "multi_aggregate",
    "ptr_to_index",
    "read_edges",
    "resolve_backend",
    "scale_stacked",
    "scatter",
    "scatter_softmax",
    "segment",
    "segment_counts",
    "sort_segments",
    "segment_statistics",
    "stacked_multi_aggregate",
    "stacked_statistics",
    "set_validation",
    "target_csr",
    "tree_level",
    "use_backend",
]
