"""PNA on ogbg-molhiv: the OGB leaderboard recipe (Corso et al., NeurIPS 2020).

The leaderboard entry (test ROC-AUC 0.7905 +- 0.0132, 326,081 parameters) is the
authors' "simple" PNA layer, reproduced here to the parameter:
AtomEncoder(80); 4 x [aggregators mean/min/max/std x scalers identity/amplification/
attenuation of the neighbours' features -> Linear(960, 80) -> batch norm -> ReLU ->
+ residual -> dropout 0.3]; mean readout; MLP 80 -> 40 -> 20 -> 1. No bond features
(that layer has none). Adam lr 0.01, weight decay 3e-6, batch 128, 200 epochs,
learning rate halved when validation ROC-AUC has not improved for 20 epochs, down
to 1e-4. The edge-aware PyG-style layer is ``--model pna`` (bond features through a
BondEncoder per layer).

ogbg-molhiv must be under the data root; build it offline from MoleculeNet's CSV:

    pyg-agg build-ogb --smiles HIV.csv.gz --name ogbg-molhiv --split scaffold --root datasets
    python examples/ogbg_molhiv_pna.py --root datasets --runs 1

Every option of ``pyg-agg train`` can override the recipe (e.g. ``--epochs 5``).
"""
import sys

from pyg_agg.cli import recipe_parser, train_from_args

RECIPE = dict(dataset="ogbg-molhiv", model="pna-simple", readout="mean", layers=4, hidden=80,
              head="halving", dropout=0.3, dropout_after_residual=True, lr=0.01,
              weight_decay=3e-6, batch_size=128, epochs=200, scheduler="plateau", min_lr=1e-4,
              out="runs/ogbg_molhiv_pna")

if __name__ == "__main__":
    sys.exit(train_from_args(recipe_parser(__doc__, RECIPE).parse_args()))
