from pyg_agg.nn.conv.lcm_conv import LCMConv  # noqa: F401
from pyg_agg.nn.conv.pna_conv import PNAConv  # noqa: F401
from pyg_agg.nn.conv.gatv2_conv import GATv2Conv  # noqa: F401
