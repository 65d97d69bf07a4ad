"""Running senseforge's work on a Ray cluster: the ``ray`` executor of recipes, evaluations and fine-tunes.

This layer sits above ``pipelines`` and ``evaluate`` (it drives both through their seams) and below the CLI.
Ray is the optional ``ray`` extra; nothing below this package imports it.
"""

from senseforge.cluster import recipes as recipes  # registers the ``ray`` executor of recipes
