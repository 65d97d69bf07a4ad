"""The recipe engine (runner, stages, review, reports) and the recipes built on it."""
