"""Recipes as stages over records: generation, filtering, verification and moderation."""
