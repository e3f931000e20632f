"""Reports: one module per format, all built from the same table model (report/model.py)."""
