from pyg_agg.datasets.tu import load_tu  # noqa: F401
