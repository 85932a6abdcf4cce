from pyg_agg.nn.aggr.lcm import LCMAggregation  # noqa: F401
