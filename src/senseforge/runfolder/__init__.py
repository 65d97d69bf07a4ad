"""What a finished (or paused) run leaves behind, as typed data: the run folder.

A build writes its run folder; ``runs show``, ``report``, ``export`` and the dataset card read it. Both
sides use the models here, so a file's shape is declared once:

* :mod:`.files` — the names of the files and folders in a run folder (``manifest.json``, ``funnel.json`` …).
* :mod:`.manifest` — :class:`~.manifest.Manifest`, what a run was asked to do and with what.
* :mod:`.funnel` — :class:`~.funnel.Funnel`: the stage rows, what was kept, the splits, the run's groups (per
  language, per task) and its figures.
* :mod:`.figures` — the few kinds of figure a recipe declares (counts, a share, a table, agreement), each able
  to print itself as plain lines.
* :mod:`.cost` — :class:`~.cost.Cost`, tokens and money per stage and per kept item.
* :mod:`.folder` — :class:`~.folder.RunFolder`, one call that opens and validates all of them.

This package stands below both ``pipelines`` (which writes run folders) and ``evaluate`` (whose report reads
them); it knows no recipe.
"""
