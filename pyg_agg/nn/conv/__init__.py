"""Convolutions (``torch_geometric.nn.MessagePassing`` subclasses)."""
from pyg_agg.nn.conv.gatv2_conv import GATv2Conv
from pyg_agg.nn.conv.lcm_conv import LCMConv
from pyg_agg.nn.conv.pna_conv import PNAConv

__all__ = ["GATv2Conv", "LCMConv", "PNAConv"]
