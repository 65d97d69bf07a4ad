"""``senseforge analyze``: the studies the papers ran on their data (see :mod:`senseforge.analyze`).

Each study is one command in its own module (``senseforge.cli.analyze_<name>``), added to
:data:`app` here; every command prints a table and writes JSON, CSV and a figure to ``--out``
(default ``analysis/<name>/``).
"""

from __future__ import annotations

import typer

from senseforge.cli import (
    analyze_concepts,
    analyze_conflicts,
    analyze_contamination,
    analyze_errors,
    analyze_irt,
    analyze_language,
    analyze_lexical,
    analyze_stats,
)

app = typer.Typer(
    help="The papers' studies on any dataset, run directory or released file: lexical, errors, conflicts, "
    "concepts, language, stats, irt; and contamination against the registry.",
    no_args_is_help=True,
)
app.command("concepts")(analyze_concepts.concepts)
app.command("conflicts")(analyze_conflicts.conflicts)
app.command("contamination")(analyze_contamination.contamination)
app.command("errors")(analyze_errors.errors)
app.command("irt")(analyze_irt.irt)
app.command("language")(analyze_language.language)
app.command("lexical")(analyze_lexical.lexical)
app.command("stats")(analyze_stats.stats)
