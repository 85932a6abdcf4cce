from pyg_agg.nn.conv.lcm_conv import LCMConv  # noqa: F401
