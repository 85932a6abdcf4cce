"""LCM aggregation on an ogbg-mol* set (default ogbg-molbace, scaffold split).

LCM convolutions (learnable commutative monoid aggregation, Ong & Velickovic,
2022) in the shared graph-level skeleton: AtomEncoder, 4 layers of hidden 128
with batch norm, residual and dropout 0.2, mean readout, MLP head; Adam lr 1e-3,
100 epochs, 3 runs; OGB's Evaluator metric (ROC-AUC or RMSE).

    python examples/ogbg_mol_lcm.py --root /path/to/datasets --dataset ogbg-molbbbp
"""
import sys

from pyg_agg.cli import recipe_parser, train_from_args

RECIPE = dict(dataset="ogbg-molbace", model="lcm", readout="mean", layers=4, hidden=128,
              dropout=0.2, lr=1e-3, batch_size=32, epochs=100, runs=3, out="runs/ogbg_mol_lcm")

if __name__ == "__main__":
    sys.exit(train_from_args(recipe_parser(__doc__, RECIPE).parse_args()))
