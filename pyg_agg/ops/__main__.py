"""``python -m pyg_agg.ops``: build the native CPU ops now (``make install`` runs it)."""
from pyg_agg.ops import native

if not native.HAS_NATIVE:
    raise SystemExit(f"pyg_agg: native ops not built: {native.WHY_NOT_NATIVE}")
print(f"pyg_agg: native ops built in {native.build_directory()}")
