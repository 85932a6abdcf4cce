from pyg_agg.nn.readout.histograph import HistoGraphReadout, HistoGraphWeights  # noqa: F401
