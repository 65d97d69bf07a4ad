"""``python -m senseforge`` runs the CLI."""

from senseforge.cli.main import main

main()
