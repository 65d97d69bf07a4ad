"""The knowledge layer: ConceptNet dumps in a DuckDB-backed store, and mCSQA question sets."""
