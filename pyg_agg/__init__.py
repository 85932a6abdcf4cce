"""pyg_agg: better neighbourhood aggregation for PyTorch Geometric."""
__version__ = "0.1.0"
