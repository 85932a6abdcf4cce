"""Ready models built from pyg_agg layers."""
from pyg_agg.nn.models.layer_history_gnn import LayerHistoryGNN

__all__ = ["LayerHistoryGNN"]
