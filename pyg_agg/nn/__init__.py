"""Layers: ``from pyg_agg.nn import GATv2Conv, PNAConv, LCMAggregation, ...``."""
from pyg_agg.nn.aggr import LCMAggregation
from pyg_agg.nn.conv import GATv2Conv, LCMConv, PNAConv
from pyg_agg.nn.models import LayerHistoryGNN
from pyg_agg.nn.readout import HistoGraphReadout, HistoGraphWeights

__all__ = [
    "GATv2Conv",
    "HistoGraphReadout",
    "HistoGraphWeights",
    "LCMAggregation",
    "LCMConv",
    "LayerHistoryGNN",
    "PNAConv",
]
