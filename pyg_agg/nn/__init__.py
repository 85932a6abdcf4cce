"""Layers: ``from pyg_agg.nn import GATv2Conv, PNAConv, LCMAggregation, ...``."""
