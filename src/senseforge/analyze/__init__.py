"""The studies the papers ran on their data, over any senseforge dataset, run directory or released file.

Each analysis is a function over records (library first) returning a result with ``rows``
(a table) and ``to_json()``; ``senseforge analyze <name>`` prints the table and writes JSON,
CSV and a figure (:mod:`senseforge.analyze.output`). Inputs are read by
:mod:`senseforge.analyze.inputs`: a file, a folder or a comma-separated list of them, pooled.
"""
