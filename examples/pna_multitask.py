"""PNA vs. PNA without scalers, MPNNs, GCN, GAT and GIN on the PNA paper's
multitask benchmark, with the paper's data, network and optimiser.
See :mod:`pyg_agg.pipelines.pna_multitask` and docs/pna.md.

    python examples/pna_multitask.py --budget cpu              # 1,000 epochs, patience 200
    python examples/pna_multitask.py --budget cpu --resume     # continue it after a kill
    python examples/pna_multitask.py                           # the paper's 10,000 / 1,000
    python examples/pna_multitask.py --budget small            # a check run of seconds

The full and cpu budgets write docs/results/pna_multitask.json (and .png, the
validation curves) and the table in docs/pna.md; the small one writes
runs/pna_multitask-small/results.json only.
"""
import sys

from pyg_agg.pipelines.pna_multitask import main

if __name__ == "__main__":
    sys.exit(main())
