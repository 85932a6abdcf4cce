"""PNA on ogbg-molhiv: the OGB leaderboard recipe (Corso et al., NeurIPS 2020).

4 PNA layers, hidden 80, aggregators mean/min/max/std, scalers identity/
amplification/attenuation, bond features through a BondEncoder per layer, batch
norm + residual, dropout 0.3, mean readout; Adam lr 0.01, weight decay 3e-6,
batch 128, 200 epochs, learning rate halved when validation ROC-AUC plateaus
(patience 20). Leaderboard: test ROC-AUC 0.7905 +- 0.0132.

ogbg-molhiv must be under the data root; build it offline from MoleculeNet's CSV:

    pyg-agg build-ogb --smiles HIV.csv.gz --name ogbg-molhiv --split scaffold --root datasets
    python examples/ogbg_molhiv_pna.py --root datasets --runs 1

Every option of ``pyg-agg train`` can override the recipe (e.g. ``--epochs 5``).
"""
import sys

from pyg_agg.cli import recipe_parser, train_from_args

RECIPE = dict(dataset="ogbg-molhiv", model="pna", readout="mean", layers=4, hidden=80,
              towers=1, dropout=0.3, lr=0.01, weight_decay=3e-6, batch_size=128, epochs=200,
              scheduler="plateau", out="runs/ogbg_molhiv_pna")

if __name__ == "__main__":
    sys.exit(train_from_args(recipe_parser(__doc__, RECIPE).parse_args()))
