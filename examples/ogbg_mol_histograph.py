"""HISTOGRAPH readout on an ogbg-mol* set (default ogbg-molbace, scaffold split).

A GIN(E) backbone (AtomEncoder/BondEncoder, 5 layers of hidden 128, batch norm,
residual, dropout 0.2) whose graph representation is read from the whole history
of layer embeddings by the HISTOGRAPH readout instead of the last layer only;
Adam lr 1e-3, 100 epochs, 3 runs; OGB's Evaluator metric.

    python examples/ogbg_mol_histograph.py --root /path/to/datasets --dataset ogbg-molbbbp
"""
import sys

from pyg_agg.cli import recipe_parser, train_from_args

RECIPE = dict(dataset="ogbg-molbace", model="gin", readout="histograph", layers=5, hidden=128,
              dropout=0.2, lr=1e-3, batch_size=32, epochs=100, runs=3,
              out="runs/ogbg_mol_histograph")

if __name__ == "__main__":
    sys.exit(train_from_args(recipe_parser(__doc__, RECIPE).parse_args()))
