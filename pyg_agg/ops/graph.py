"""The graph input of every conv, read once and sorted once.

A message-passing layer receives its graph in one of several forms: a
``[2, E]`` ``edge_index`` (with PyG's ``flow``), PyG's :class:`EdgeIndex`, a
``torch_sparse.SparseTensor`` ``adj_t`` or a ``torch.sparse`` COO/CSR
adjacency (rows = targets). :func:`read_edges` turns each into the same
``(source, target)`` pair, validated, and :func:`target_csr` into the
target-sorted CSR that the fused kernels walk.

**What is cached.** Sorting the edges by target is part of every fused op's
cost, and a model calls several layers on the same graph, epoch after epoch.
:func:`target_csr` therefore caches the CSR (and, on first use, its
transpose, its rows grouped by degree) per graph object, and
:func:`index_segments` the sort of an unsorted segment index per index. The
cache holds a weak reference to the ``edge_index`` (for a ``SparseTensor``,
to its column tensor), so an entry
dies with its graph. An entry is used only for the same node counts, flow
and self-loop handling, and only while the tensor's version counter is
unchanged: an in-place write to ``edge_index`` invalidates it. PyG's
:class:`EdgeIndex` sorted by target and CSR adjacencies are used as they are,
without a sort. Under :func:`torch.compile` nothing is cached (the sort is
part of the graph), nor for inference tensors (made under
:func:`torch.inference_mode`, they have no version counter to tell a write).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor

from pyg_agg.ops.backend import resolve_backend
from pyg_agg.ops.checks import check_index
from pyg_agg.ops.memo import remembered, remembered_1d

FLOWS = ("source_to_target", "target_to_source")


class Edges(NamedTuple):
    """The edges of a graph input, in the input's order.

    Attributes:
        source: ``[E]`` int64 source node of each edge.
        target: ``[E]`` int64 target node.
        kind: the input form (``"index"``, ``"torch_sparse"``, ``"coo"``,
            ``"csr"``), for outputs that mirror it.
        values: the adjacency's values for sparse input, else None.
        key: the object the graph is cached under (see :func:`target_csr`).
        num_sources, num_targets: the node counts of the two sides.
        flow: which row of an ``edge_index`` held the sources.
    """

    source: Tensor
    target: Tensor
    kind: str
    values: Optional[Tensor]
    key: Any
    num_sources: int
    num_targets: int
    flow: str = "source_to_target"


@dataclass
class CSRGraph:
    """Edges sorted by target row, as the fused kernels read them.

    Row ``i`` holds CSR positions ``ptr[i]:ptr[i + 1]``; position ``p`` reads
    source ``col[p]`` and is the input edge ``perm[p]``. ``col`` may extend
    past ``ptr[-1]``: those entries are *parked*, in no row (a layer parks
    edges it drops, such as replaced self-loops, so that no shape depends on
    the data).
    """

    ptr: Tensor
    col: Tensor
    perm: Optional[Tensor]  # None: the input already was in CSR order
    num_sources: int

    @property
    def num_rows(self) -> int:
        return self.ptr.numel() - 1

    def to_csr_order(self, edge_values: Optional[Tensor]) -> Optional[Tensor]:
        """Per-edge values (input order) permuted into CSR order."""
        if edge_values is None or self.perm is None:
            return edge_values
        return edge_values.index_select(0, self.perm)

    def to_input_order(self, csr_values: Tensor) -> Tensor:
        """Per-position values (CSR order) permuted back into input order."""
        if self.perm is None:
            return csr_values
        return torch.empty_like(csr_values).index_copy_(0, self.perm, csr_values)

    def transpose(self) -> tuple[Tensor, Tensor, Tensor]:
        """:func:`transpose_csr` of this graph (computed on first use, then kept)."""
        return transpose_csr(self.ptr, self.col, self.num_sources)


def sort_segments(index: Tensor, num_segments: int) -> tuple[Tensor, Tensor]:
    """The CSR of an unsorted segment index: ``(ptr, perm)``.

    A stable sort of ``index`` (entries in ``[0, num_segments)``, unchecked):
    segment ``s``'s entries, in input order, are
    ``perm[ptr[s]:ptr[s + 1]]``. The native backend (CPU) counting-sorts in two
    passes over the index; the reference is ``argsort`` and a count.
    """
    if resolve_backend("sort", index.device.type) == "native":
        return torch.ops.pyg_agg.counting_sort(index.long().contiguous(), num_segments)
    perm = torch.argsort(index, stable=True)
    counts = torch.zeros(num_segments, dtype=torch.long, device=index.device)
    counts.index_add_(0, index, torch.ones_like(index, dtype=torch.long))
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)]), perm


def index_segments(index: Tensor, num_segments: int) -> tuple[Tensor, Tensor]:
    """:func:`sort_segments` of a segment index, remembered per index (a view
    such as ``edge_index[1]`` under the tensor it views) while it is not
    written: an aggregation called on the same graph every step (full-graph
    training, every layer of a model) sorts it once."""
    return remembered_1d(index, ("segments", num_segments),
                         lambda: sort_segments(index, num_segments))


def transpose_csr(ptr: Tensor, col: Tensor, num_sources: int) -> tuple[Tensor, Tensor, Tensor]:
    """The transposed graph of a CSR ``(ptr, col)``, by positions.

    Returns ``(csc_ptr, csc_pos, edge_row)``: the CSR positions of source
    ``j``'s edges are ``csc_pos[csc_ptr[j]:csc_ptr[j + 1]]``, in CSR order (a
    stable sort, so sums over them are deterministic), and ``edge_row[p]`` is
    the row of position ``p`` (``num_rows`` for a parked one).

    Remembered for the same ``ptr`` and ``col`` objects while neither is
    written (:func:`~pyg_agg.ops.memo.remembered`), so that every backward
    over a cached :class:`CSRGraph` reuses one transpose.
    """
    def transpose() -> tuple[Tensor, Tensor, Tensor]:
        csc_ptr, csc_pos = sort_segments(col, num_sources)
        return csc_ptr, csc_pos, position_rows(ptr, col.numel())

    return remembered(col, ("transpose", num_sources), transpose, also=(ptr,))


class DegreeGroups(NamedTuple):
    """The rows of a CSR grouped by degree (:func:`degree_groups`)."""

    degrees: Tensor  # [D] the distinct degrees, ascending
    order: Tensor  # [N] the rows, stably sorted by degree
    sizes: list[int]  # how many rows have each degree
    ends: Tensor  # [D] int32: where each group ends in order (grouped_mm's offsets)


def degree_groups(ptr: Tensor) -> DegreeGroups:
    """The rows of the CSR ``ptr`` grouped by degree: the rows of degree
    ``degrees[g]`` are the ``sizes[g]`` entries of ``order`` after the first
    ``sum(sizes[:g])``.

    Remembered per ``ptr`` object while it is not written
    (:func:`~pyg_agg.ops.memo.remembered`): every layer of a model over the
    same graph shares one grouping.
    """
    def group() -> DegreeGroups:
        degrees, group_of_row = torch.unique(ptr.diff(), return_inverse=True)
        group_ptr, order = sort_segments(group_of_row, degrees.numel())
        return DegreeGroups(degrees, order, group_ptr.diff().tolist(),
                            group_ptr[1:].to(torch.int32))

    return remembered(ptr, "degree_groups", group)


def position_rows(ptr: Tensor, num_positions: int) -> Tensor:
    """The row of each of ``num_positions`` CSR positions; ``ptr.numel() - 1``
    for the parked positions past ``ptr[-1]``."""
    row_sizes = torch.cat([ptr.diff(), (num_positions - ptr[-1:]).clamp(min=0)])
    rows = torch.arange(ptr.numel(), device=ptr.device)
    return torch.repeat_interleave(rows, row_sizes, output_size=num_positions)


def read_edges(edge_index: Any, num_sources: int, num_targets: int,
               flow: str = "source_to_target") -> Edges:
    """Validates a graph input and returns its edges as ``(source, target)``.

    Args:
        edge_index: ``[2, E]`` integer tensor or :class:`EdgeIndex` (row 0 =
            source under the default ``flow``), ``torch_sparse.SparseTensor``
            or ``torch.sparse`` COO/CSR adjacency of shape
            ``(num_targets, num_sources)``.
        num_sources, num_targets: node counts of the two sides.
        flow: PyG's ``flow``; ``"target_to_source"`` reads row 0 as the
            target. Sparse adjacencies are always target-major, so they
            accept only the default, as in PyG.

    Raises:
        TypeError, ValueError: naming ``edge_index`` and what was expected.
    """
    if flow not in FLOWS:
        raise ValueError(f"`flow` must be one of {FLOWS}, got {flow!r}")
    if _is_sparse_tensor(edge_index) or (isinstance(edge_index, Tensor)
                                         and edge_index.layout != torch.strided):
        if flow != "source_to_target":
            raise ValueError("`flow='target_to_source'` is invalid for a sparse adjacency "
                             "(rows are targets); transpose it or pass a [2, E] edge_index")
        return _read_adjacency(edge_index, num_sources, num_targets)
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"`edge_index` must be a [2, E] tensor, a torch.sparse adjacency or a "
                        f"SparseTensor, got {type(edge_index).__name__}")
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"`edge_index` must be an integer tensor (torch.long or torch.int), got "
                        f"dtype {edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"`edge_index` must have shape [2, E], got {tuple(edge_index.shape)}")
    # EdgeIndex's own indexing would return EdgeIndex objects
    plain = edge_index if type(edge_index) is Tensor else edge_index.as_subclass(Tensor)
    first, second = plain[0].long(), plain[1].long()
    source, target = (first, second) if flow == "source_to_target" else (second, first)
    check_index(source, source, 0, num_sources, name="edge_index (sources)")
    check_index(target, target, 0, num_targets, name="edge_index (targets)")
    return Edges(source, target, "index", None, edge_index, num_sources, num_targets, flow)


def _is_sparse_tensor(obj: Any) -> bool:
    return type(obj).__name__ == "SparseTensor" and hasattr(obj, "csr")


def _read_adjacency(adj: Any, num_sources: int, num_targets: int) -> Edges:
    if _is_sparse_tensor(adj):
        size, kind, key = tuple(adj.sizes()), "torch_sparse", adj.storage.col()
    elif adj.layout in (torch.sparse_coo, torch.sparse_csr):
        size, kind, key = tuple(adj.shape[:2]), "coo" if adj.layout == torch.sparse_coo else "csr", adj
    else:
        raise ValueError(f"`edge_index` has unsupported layout {adj.layout}; use a [2, E] "
                         f"tensor, sparse COO or sparse CSR")
    if size != (num_targets, num_sources):
        raise ValueError(f"`edge_index` adjacency has shape {size} but must be "
                         f"(num_target_nodes, num_source_nodes) = ({num_targets}, {num_sources})")
    if kind == "torch_sparse":
        target, source, values = adj.coo()
    elif kind == "coo":
        adj = adj if adj.is_coalesced() else adj.coalesce()
        (target, source), values = adj.indices(), adj.values()
    else:
        source = adj.col_indices().long()
        target = position_rows(adj.crow_indices().long(), source.numel())
        values = adj.values()
    return Edges(source.long(), target.long(), kind, values, key, num_sources, num_targets)


def target_csr(edges: Edges, rows: Optional[Tensor] = None, sources: Optional[Tensor] = None,
               options: tuple = ()) -> CSRGraph:
    """The CSR of ``edges`` sorted by target (``edges.num_targets`` rows),
    cached per graph.

    Args:
        edges: from :func:`read_edges`.
        rows, sources: per-edge row and source to sort instead of
            ``edges.target`` / ``edges.source``, for a layer that adds or
            parks edges (a row of ``num_targets`` parks an entry). They must
            be a pure function of the graph and ``options``, which together
            key the cache.
        options: what else the CSR depends on (e.g. the self-loop handling).
    """
    key, num_rows, num_sources = edges.key, edges.num_targets, edges.num_sources
    if rows is None and edges.flow == "source_to_target" and getattr(key, "is_sorted_by_col", False):
        (ptr, col), _ = key.get_csc()  # PyG's EdgeIndex sorted by target: its cached CSC
        return CSRGraph(ptr.long(), col.long(), None, num_sources)
    if rows is None and edges.kind == "csr":
        return CSRGraph(key.crow_indices().long(), edges.source, None, num_sources)
    rows = edges.target if rows is None else rows
    sources = edges.source if sources is None else sources
    # other options on the same graph (two kinds of layer in one model) are other entries
    return remembered(key, ("csr", num_rows, num_sources, edges.flow, options),
                      lambda: _sort_by_row(rows, sources, num_rows, num_sources))


def _sort_by_row(rows: Tensor, sources: Tensor, num_rows: int, num_sources: int) -> CSRGraph:
    """Stable sort of the entries by row; rows equal to ``num_rows`` are parked last."""
    ptr, perm = sort_segments(rows, num_rows + 1)
    return CSRGraph(ptr[:-1], sources.index_select(0, perm), perm, num_sources)
