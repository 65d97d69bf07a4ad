"""The package version, in a module of its own that imports nothing.

Any layer may import it (``from senseforge._version import __version__``) without importing
the package root ``senseforge``, which sits above every layer.
"""

__version__ = "0.1.0.dev0"
