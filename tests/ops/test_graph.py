"""The shared graph adapter: every input form, flow, the per-graph CSR cache."""
import pytest
import torch
from torch_geometric import EdgeIndex

from pyg_agg.ops import HAS_NATIVE, HAS_TORCH_SPARSE, degree_groups, read_edges, target_csr, use_backend
from pyg_agg.ops.graph import sort_segments, transpose_csr

NUM_SRC, NUM_DST = 6, 5


def edge_index(seed=0, num_edges=17):
    gen = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, NUM_SRC, (num_edges,), generator=gen),
                        torch.randint(0, NUM_DST, (num_edges,), generator=gen)])


def edge_set(source, target):
    return sorted(zip(source.tolist(), target.tolist(), strict=True))


def check_csr(graph, source, target):
    """Row i of the CSR holds exactly the edges into i, perm points at them."""
    rows = torch.repeat_interleave(torch.arange(graph.num_rows), graph.ptr.diff())
    assert edge_set(graph.col, rows) == edge_set(source, target)
    if graph.perm is not None:
        assert torch.equal(source[graph.perm], graph.col)
        assert torch.equal(target[graph.perm], rows)


def test_every_input_form_gives_the_same_edges():
    ei = edge_index()
    expected = edge_set(ei[0], ei[1])
    adj = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.size(1)), (NUM_DST, NUM_SRC))
    forms = [ei, ei.int(), adj, adj.coalesce().to_sparse_csr(),
             EdgeIndex(ei, sparse_size=(NUM_SRC, NUM_DST))]
    if HAS_TORCH_SPARSE:
        from torch_sparse import SparseTensor

        forms.append(SparseTensor(row=ei[1], col=ei[0], sparse_sizes=(NUM_DST, NUM_SRC)))
    for form in forms:
        edges = read_edges(form, NUM_SRC, NUM_DST)
        # a coalesced adjacency merges duplicates: compare edge sets
        assert sorted(set(edge_set(edges.source, edges.target))) == sorted(set(expected))
        check_csr(target_csr(edges), edges.source, edges.target)


def test_flow_target_to_source_reads_row_0_as_target():
    ei = edge_index()
    edges = read_edges(ei, NUM_DST, NUM_SRC, flow="target_to_source")
    assert torch.equal(edges.source, ei[1]) and torch.equal(edges.target, ei[0])
    check_csr(target_csr(edges), ei[1], ei[0])
    adj = torch.sparse_coo_tensor(ei.flip(0), torch.ones(ei.size(1)), (NUM_DST, NUM_SRC))
    with pytest.raises(ValueError, match="invalid for a sparse adjacency"):
        read_edges(adj, NUM_SRC, NUM_DST, flow="target_to_source")


def test_csr_is_cached_per_graph_and_invalidated_by_in_place_writes():
    ei = edge_index()
    first = target_csr(read_edges(ei, NUM_SRC, NUM_DST))
    assert target_csr(read_edges(ei, NUM_SRC, NUM_DST)) is first
    # another flow, node count or option is another entry, and both stay cached
    flipped = target_csr(read_edges(ei, NUM_DST, NUM_SRC, "target_to_source"))
    assert flipped is not first
    assert target_csr(read_edges(ei, NUM_SRC, NUM_DST)) is first
    assert target_csr(read_edges(ei, NUM_DST, NUM_SRC, "target_to_source")) is flipped
    ei[1, 0] = (ei[1, 0] + 1) % NUM_DST  # in place: the version counter moves
    fresh = target_csr(read_edges(ei, NUM_SRC, NUM_DST))
    assert fresh is not first
    check_csr(fresh, ei[0], ei[1])
    # an equal but distinct tensor is another graph
    assert target_csr(read_edges(ei.clone(), NUM_SRC, NUM_DST)) is not fresh


def test_the_transpose_is_kept_for_the_same_ptr_and_col_until_either_is_written():
    graph = target_csr(read_edges(edge_index(), NUM_SRC, NUM_DST))
    first = transpose_csr(graph.ptr, graph.col, NUM_SRC)
    assert transpose_csr(graph.ptr, graph.col, NUM_SRC) is first
    assert graph.transpose() is first
    assert transpose_csr(graph.ptr.clone(), graph.col, NUM_SRC) is not first  # another ptr
    assert transpose_csr(graph.ptr, graph.col, NUM_SRC + 1) is not first
    col = graph.col.clone()
    kept = transpose_csr(graph.ptr, col, NUM_SRC)
    col[0] = (col[0] + 1) % NUM_SRC
    moved = transpose_csr(graph.ptr, col, NUM_SRC)
    assert moved is not kept
    csc_ptr, csc_pos, _ = moved
    first_source = torch.searchsorted(csc_ptr, (csc_pos == 0).nonzero()[0], right=True) - 1
    assert int(first_source) == int(col[0])


def test_inference_tensors_are_read_without_a_cache():
    # inference tensors have no version counter: nothing may be cached under them
    with torch.inference_mode():
        ei = edge_index()
        graph = target_csr(read_edges(ei, NUM_SRC, NUM_DST))
        check_csr(graph, ei[0], ei[1])
        assert target_csr(read_edges(ei, NUM_SRC, NUM_DST)) is not graph
        transpose_csr(graph.ptr, graph.col, NUM_SRC)


def test_edge_index_sorted_by_target_is_used_without_a_sort():
    ei = EdgeIndex(edge_index(), sparse_size=(NUM_SRC, NUM_DST)).sort_by("col")[0]
    graph = target_csr(read_edges(ei, NUM_SRC, NUM_DST))
    assert graph.perm is None
    plain = ei.as_subclass(torch.Tensor)
    check_csr(graph, plain[0], plain[1])


def test_parked_rows_and_transpose():
    ei = edge_index()
    edges = read_edges(ei, NUM_SRC, NUM_DST)
    rows = torch.where(ei[0] == 0, NUM_DST, ei[1])  # park the edges out of node 0
    graph = target_csr(edges, rows, options=("park",))
    assert int(graph.ptr[-1]) == int((ei[0] != 0).sum())
    assert torch.all(graph.col[graph.ptr[-1]:] == 0)
    csc_ptr, csc_pos, edge_row = transpose_csr(graph.ptr, graph.col, NUM_SRC)
    for j in range(NUM_SRC):
        positions = csc_pos[csc_ptr[j]:csc_ptr[j + 1]]
        assert torch.all(graph.col[positions] == j)
        assert torch.all(positions.diff() > 0)  # stable: CSR order within a source
    kept = ei[0] != 0
    parked = [(0, NUM_DST)] * int((~kept).sum())
    assert edge_set(graph.col, edge_row) == sorted(edge_set(ei[0][kept], ei[1][kept]) + parked)


@pytest.mark.parametrize("bad,match", [
    (lambda ei: ei[0], r"`edge_index` must have shape \[2, E\]"),
    (lambda ei: ei.float(), "must be an integer tensor"),
    (lambda ei: ei + NUM_SRC, r"`edge_index \(sources\)` contains \d+, out of range"),
    (lambda ei: [[0], [1]], r"must be a \[2, E\] tensor"),
])
def test_clear_errors(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        read_edges(bad(edge_index()), NUM_SRC, NUM_DST)


SORT_BACKENDS = ["torch", pytest.param("native", marks=pytest.mark.skipif(
    not HAS_NATIVE, reason="the native CPU ops are not built"))]


@pytest.mark.parametrize("backend", SORT_BACKENDS)
@pytest.mark.parametrize("num_entries", [0, 1, 40, 200_003])  # the last one sorts in chunks
def test_sort_segments_is_a_stable_csr_sort(backend, num_entries):
    gen = torch.Generator().manual_seed(num_entries)
    num_segments = 50
    index = torch.randint(0, num_segments - 3, (num_entries,), generator=gen)  # empty segments
    index[: num_entries // 3] = 7  # a hub
    with use_backend(backend):
        ptr, perm = sort_segments(index, num_segments)
        ptr32, perm32 = sort_segments(index.int(), num_segments)
    assert torch.equal(perm, torch.argsort(index, stable=True))
    assert torch.equal(ptr.diff(), torch.bincount(index, minlength=num_segments))
    assert ptr[0] == 0 and ptr.numel() == num_segments + 1
    assert torch.equal(ptr32, ptr) and torch.equal(perm32, perm)


@pytest.mark.skipif(not HAS_NATIVE, reason="the native CPU ops are not built")
def test_native_sort_is_the_same_for_every_thread_count():
    index = torch.randint(0, 1000, (300_000,), generator=torch.Generator().manual_seed(1))
    previous = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            with use_backend("native"):
                results.append(sort_segments(index, 1000))
    finally:
        torch.set_num_threads(previous)
    for ptr, perm in results[1:]:
        assert torch.equal(ptr, results[0][0]) and torch.equal(perm, results[0][1])


def test_degree_groups_orders_the_rows_by_degree_once_per_graph():
    count = torch.tensor([2, 0, 3, 2, 0, 1, 3, 2])
    ptr = torch.cat([count.new_zeros(1), count.cumsum(0)])
    groups = degree_groups(ptr)
    assert groups.degrees.tolist() == [0, 1, 2, 3] and groups.sizes == [2, 1, 3, 2]
    assert groups.order.tolist() == [1, 4, 5, 0, 3, 7, 2, 6]  # stable within a degree
    assert degree_groups(ptr) is groups  # kept for the same ptr
    ptr[-1] += 1
    assert degree_groups(ptr).sizes == [2, 1, 2, 3]  # a write drops it (the last row: 3)


@pytest.mark.skipif(not HAS_NATIVE, reason="the native multi_aggregate is the one that sorts")
def test_an_unsorted_index_is_sorted_once_until_written(monkeypatch):
    import pyg_agg.ops.graph as graph
    from pyg_agg.ops import multi_aggregate

    sorts = []
    real = graph.sort_segments
    monkeypatch.setattr(graph, "sort_segments", lambda *args: sorts.append(1) or real(*args))
    edges = edge_index(seed=3)
    src = torch.randn(edges.size(1), 2)
    with use_backend("native"):
        first = multi_aggregate(src, edges[1], NUM_DST, stats=("sum", "max"))
        again = multi_aggregate(src, edges[1], NUM_DST, stats=("sum", "max"))  # a new view of that row
        assert len(sorts) == 1 and all(torch.equal(first[k], again[k]) for k in first)
        edges[1] = edges[1].flip(0)  # an in-place write: sorted again, and right
        moved = multi_aggregate(src, edges[1], NUM_DST, stats=("sum",))["sum"]
    expected = torch.zeros(NUM_DST, 2).index_add_(0, edges[1], src)
    assert len(sorts) == 2
    torch.testing.assert_close(moved, expected)
