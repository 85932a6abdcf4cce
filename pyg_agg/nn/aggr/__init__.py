"""Aggregations (``torch_geometric.nn.aggr.Aggregation`` subclasses)."""
from pyg_agg.nn.aggr.degree_scaler import DegreeScalerAggregation
from pyg_agg.nn.aggr.lcm import LCMAggregation

__all__ = ["DegreeScalerAggregation", "LCMAggregation"]
