"""Graph- and node-level readouts."""
from pyg_agg.nn.readout.histograph import HistoGraphReadout, HistoGraphWeights

__all__ = ["HistoGraphReadout", "HistoGraphWeights"]
