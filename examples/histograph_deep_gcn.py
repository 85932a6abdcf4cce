"""Deep GCNs on Cora and CiteSeer at 2 / 8 / 32 / 64 layers: plain, with HISTOGRAPH
over the layer history, and with PyG's JumpingKnowledge.
See :mod:`pyg_agg.pipelines.histograph_deep_gcn` and docs/histograph.md.

    python examples/histograph_deep_gcn.py --root /work/shared/datasets            # full
    python examples/histograph_deep_gcn.py --root /work/shared/datasets --resume   # after a kill
    python examples/histograph_deep_gcn.py --root /work/shared/datasets --budget small

The full budget writes docs/results/histograph_deep_gcn.json and the table in
docs/histograph.md; the small one writes runs/histograph_deep_gcn-small/results.json only.
"""
import sys

from pyg_agg.pipelines.histograph_deep_gcn import main

if __name__ == "__main__":
    sys.exit(main())
