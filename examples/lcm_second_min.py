"""Second minimum of a multiset: LCM vs sum, max, GRU and PyG's LCMAggregation,
with the setup of PyG's ``examples/lcm_aggr_2nd_min.py``.
See :mod:`pyg_agg.pipelines.lcm_second_min` and docs/lcm.md.

    python examples/lcm_second_min.py                    # the full protocol
    python examples/lcm_second_min.py --resume           # continue it after a kill
    python examples/lcm_second_min.py --budget small     # a check run of seconds

The full budget writes docs/results/lcm_second_min.json and the table in docs/lcm.md;
the small one writes runs/lcm_second_min-small/results.json only.
"""
import sys

from pyg_agg.pipelines.lcm_second_min import main

if __name__ == "__main__":
    sys.exit(main())
