"""GATv2 on ogbn-arxiv, 8 heads (Brody et al., ICLR 2022; paper: 71.87 +- 0.25).

Full-batch node classification on the (symmetrised) citation graph: 3 GATv2
layers, 8 concatenated heads of 32 channels, batch norm, dropout 0.5, averaged
heads in the output layer; Adam lr 0.002, 500 epochs, model selection on
validation accuracy. These are our settings for the paper's architecture; the
paper's exact training hyperparameters were not available offline.

ogbn-arxiv cannot be downloaded here; the same code path runs on any node dataset:

    python examples/ogbn_arxiv_gatv2.py --dataset Cora --root /path/to/datasets --epochs 50
"""
import sys

from pyg_agg.cli import recipe_parser, train_from_args

RECIPE = dict(dataset="ogbn-arxiv", model="gatv2", layers=3, hidden=256, heads=8, dropout=0.5,
              lr=0.002, epochs=500, out="runs/ogbn_arxiv_gatv2")

if __name__ == "__main__":
    sys.exit(train_from_args(recipe_parser(__doc__, RECIPE).parse_args()))
