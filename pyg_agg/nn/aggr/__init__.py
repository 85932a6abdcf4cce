"""Aggregations (``torch_geometric.nn.aggr.Aggregation`` subclasses)."""
from pyg_agg.nn.aggr.lcm import LCMAggregation

__all__ = ["LCMAggregation"]
