from pyg_agg.nn.models.layer_history_gnn import LayerHistoryGNN  # noqa: F401
