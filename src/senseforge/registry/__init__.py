"""The contamination registry: public benchmarks kept as fingerprints (never their text), and the checks
of new items against them (see :mod:`senseforge.registry.store` and :mod:`senseforge.registry.check`)."""
