"""TU graph classification (MUTAG, PROTEINS, ENZYMES) with a 5-layer GIN: HISTOGRAPH
(signed and softmax layer weights) against mean, sum and PyG's JumpingKnowledge readouts,
end to end and on a frozen backbone, 10-fold cross-validation.
See :mod:`pyg_agg.pipelines.histograph_tu` and docs/histograph.md.

    python examples/histograph_tu.py --root /work/shared/datasets            # full
    python examples/histograph_tu.py --root /work/shared/datasets --resume   # after a kill
    python examples/histograph_tu.py --root /work/shared/datasets --budget small

The full budget writes docs/results/histograph_tu.json and the table in
docs/histograph.md; the small one writes runs/histograph_tu-small/results.json only.
"""
import sys

from pyg_agg.pipelines.histograph_tu import main

if __name__ == "__main__":
    sys.exit(main())
