"""Item response theory over evaluations: per-item difficulty and discrimination, suspicious keys, small subsets.

``fit`` (the 1PL/2PL fit), ``suspicious`` (items that look wrongly keyed), ``subset`` (a small subset that
ranks like the whole, checked leaving one respondent out), ``inputs`` (eval run folders, JSONL rows),
``simulate`` (answers with known parameters, for tests and ``benchmarks/irt_recovery.py``).
"""
