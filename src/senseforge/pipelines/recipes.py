"""The recipes senseforge knows, by name: listed here the way a plugin would be, imported when asked for."""

from __future__ import annotations

from senseforge.errors import ConfigError
from senseforge.llm.mock import AnyResponder
from senseforge.pipelines.recipe import Recipe


def recipes() -> dict[str, Recipe]:
    """The built-in recipes by name."""
    from senseforge.pipelines.crow.recipe import CROW
    from senseforge.pipelines.culture_adapt.recipe import CULTURE_ADAPT
    from senseforge.pipelines.culture_gen.recipe import CULTURE_GEN
    from senseforge.pipelines.human_gen.recipe import HUMAN_GEN
    from senseforge.pipelines.mcsqa.recipe import MCSQA

    return {recipe.name: recipe for recipe in (MCSQA, CULTURE_GEN, CULTURE_ADAPT, HUMAN_GEN, CROW)}


def get_recipe(name: str) -> Recipe:
    """A recipe by name.

    Raises:
        ConfigError: no such recipe.
    """
    known = recipes()
    if name not in known:
        raise ConfigError(f"unknown recipe {name!r}: use one of {', '.join(sorted(known))}")
    return known[name]


def dry_run_authors() -> dict[str, AnyResponder]:
    """Every recipe's dry-run authors, by their ``scripted/<name>``."""
    return {name: author for recipe in recipes().values() for name, author in recipe.authors.items()}
