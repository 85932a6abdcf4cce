"""Layers: ``from pyg_agg.nn import GATv2Conv, PNAConv, LCMAggregation, ...``."""
from pyg_agg.nn.readout.histograph import HistoGraphReadout, HistoGraphWeights  # noqa: F401
from pyg_agg.nn.aggr.lcm import LCMAggregation  # noqa: F401
from pyg_agg.nn.conv.lcm_conv import LCMConv  # noqa: F401
from pyg_agg.nn.conv.pna_conv import PNAConv  # noqa: F401
from pyg_agg.nn.conv.gatv2_conv import GATv2Conv  # noqa: F401
