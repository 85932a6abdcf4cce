"""DictionaryLookup (Brody et al., 2022) up to k = 100: GATv2 with one head vs
GAT with one and eight heads, train and test accuracy.
See :mod:`pyg_agg.pipelines.dictionary_lookup` and docs/gatv2.md.

    python examples/dictionary_lookup.py                 # the full protocol
    python examples/dictionary_lookup.py --resume        # continue it after a kill
    python examples/dictionary_lookup.py --budget small  # a check run of seconds

The full budget writes docs/results/dictionary_lookup.json and the table in
docs/gatv2.md; the small one writes runs/dictionary_lookup-small/results.json only.
"""
import sys

from pyg_agg.pipelines.dictionary_lookup import main

if __name__ == "__main__":
    sys.exit(main())
