"""What every recipe's config holds, how it is hashed, and how a run's settings are resolved.

A recipe's config is a :class:`RecipeConfig` subclass that adds the recipe's own fields.
The config decides what a build produces: it is hashed into the manifest, and ``--resume``
refuses a config whose hash differs, naming each difference. Report-only settings (the
human rate) and inputs that arrive over time (review decisions) are not part of it.

Settings reach a run from, lowest precedence first: the manifest of the run being
resumed, a TOML file (``--config run.toml``, parsed straight into the config model),
``--set key=value`` pairs, then the recipe's own flags.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo

from senseforge.errors import ConfigError
from senseforge.llm.base import PromptStyle
from senseforge.llm.registry import DEFAULT_MODEL, chat_template_for, parse_spec, provider_info
from senseforge.pipelines.panel import Panel, VerificationPanel

StyleChoice = Literal["auto", PromptStyle]
ContaminationMode = Literal["auto", "reject", "flag", "off"]
"""The ``style`` setting: a :data:`~senseforge.llm.base.PromptStyle`, or ``auto`` (by the model: :func:`is_chat`)."""


def is_chat(spec: str, options: Mapping[str, Any] | None = None) -> bool:
    """Whether the model has a chat template (``auto`` then writes chat prompts), rather than being a base model.

    Asked of the model itself before it is opened (:func:`senseforge.llm.registry.chat_template_for`):
    the GGUF file's metadata, a model folder's tokenizer files, ``api`` of an endpoint.
    """
    return chat_template_for(spec, options) is not None


def runs_locally(spec: str) -> bool:
    """Whether the model runs on this machine as a base model (``llamacpp/…``, ``hf/…``), not a chat API.

    Settings whose default is "by model" (a recipe's reply budget, concepts per call) pick the
    small values for these, on which a small base model on a few CPU cores finishes in minutes
    (it writes until the token limit), and the paper's values for chat models.

    >>> runs_locally("llamacpp/gemma-3-270m"), runs_locally("openai/gpt-4o-mini"), runs_locally("scripted/echo")
    (True, False, False)
    """
    info = provider_info(spec)
    return not info.remote and not info.chat


ONE_BATCH = 1_000_000_000
"""Records per batch of a stage whose model answers through an API's Batch API: all of them at once."""

LATER_SETTINGS: tuple[str, ...] = (
    "adjudicate",
    "registry",
    "contamination",
    "panel",
    "hard_when",
    "skip_review_when",
)
"""Settings every recipe gained after runs existed; at their default they do not enter the config hash."""

UNSTORED_AT_DEFAULT: dict[str, Any] = {
    "registry": None,
    "contamination": "auto",
    "panel": [],
    "hard_when": "none",
    "skip_review_when": "never",
}
"""Later settings also left out of the stored form (the manifest's ``config``) while at their default, so a run
that does not use them records its config as before."""


def _stored(dumped: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in dumped.items() if UNSTORED_AT_DEFAULT.get(key, dumped) != _jsonish(value)}


class ReviewSettings(Panel):
    """The review panel of a recipe whose stages include the engine's review (:class:`ReviewedConfig`).

    A :class:`~senseforge.pipelines.panel.Panel` given by the review's own names (:attr:`names`), flat as every
    other setting (``--review-k``, ``--set review_k=3``, ``review_k`` in a TOML file), and written back by them,
    flat, into the manifest and the config hash. Its LM judges sample at temperature 0.
    """

    names: ClassVar[Mapping[str, str]] = types.MappingProxyType(
        {
            "judges": "reviewers",
            "judges_policy": "lm_review_policy",
            "final": "lm_review_final",
            "policy": "review_policy",
            "k": "review_k",
            "adjudicate": "adjudicate",
        }
    )
    """The name each panel field is given and stored by, in the order of the flags and the manifest."""

    judges: tuple[str, ...] = Field(default=(), validation_alias=AliasChoices("judges", "reviewers"))
    """LM judges (model specs; repeat one to ask it several times, each with its own seed); empty: people."""
    judges_policy: str | None = Field(default=None, validation_alias=AliasChoices("judges_policy", "lm_review_policy"))
    """How the LM judges' votes decide (``unanimous``, ``at-least:2/3`` …); by default all must accept."""
    final: bool = Field(default=False, validation_alias=AliasChoices("final", "lm_review_final"))
    """Items the LM judges accept are accepted without people (labelled ``review: lm``); else people follow."""
    policy: str = Field(default="unanimous", validation_alias=AliasChoices("policy", "review_policy"))
    """How people's votes decide, over ``review_k`` of them."""
    k: int = Field(default=2, ge=1, validation_alias=AliasChoices("k", "review_k"))
    """People per reviewed item."""

    @model_validator(mode="after")
    def _at_zero(self) -> Self:
        if self.temperature != 0.0:
            raise ValueError("the review's LM judges sample at temperature 0 (it is not a setting of the review)")
        return self

    @classmethod
    def given_as(cls, name: str) -> str:
        return cls.names.get(name, name)

    @classmethod
    def flat_fields(cls) -> dict[str, FieldInfo]:
        """Every review setting by the name it is given by, in order."""
        return {flat: cls.model_fields[name] for name, flat in cls.names.items()}

    @model_serializer(mode="wrap")
    def _by_names(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The settings by their given names (the temperature, fixed, is not one)."""
        dumped: dict[str, Any] = handler(self)
        return {flat: dumped[name] for name, flat in self.names.items()}


REVIEW_DEFAULTS: dict[str, Any] = ReviewSettings().model_dump(mode="json")
"""The review settings at their defaults, as JSON. Every recipe's config held them before they moved into
:class:`ReviewSettings`: the hash of a recipe without a review still counts them (its stored runs resume), and
a manifest that records them is read back without them."""


class RecipeConfig(BaseModel):
    """The settings every recipe shares; a recipe subclasses it with its own fields.

    Subclasses set ``recipe`` to a ``Literal`` of their name and may list, in
    :attr:`lm_stages`, the stages that take their own ``--stage-model``.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    lm_stages: ClassVar[tuple[str, ...]] = ()
    """Stages that call a model, each with its own ``--stage-model``."""
    review_stage: ClassVar[str | None] = None
    """The stage whose batches follow the LM judges' model (batch sizing)."""
    unused: ClassVar[tuple[str, ...]] = ()
    """Shared settings the recipe does not read: no flag is made for them, and a value other than the default
    is refused (naming what the recipe reads instead)."""
    unused_hint: ClassVar[str] = ""
    """What the recipe reads instead of a shared setting it does not use."""
    panel_settings: ClassVar[tuple[str, ...]] = ()
    """The recipe's own settings its panels (:meth:`panels`) are given by, named when a review setting it does not
    have is given."""

    recipe: str
    seed: int = 0
    """Seed of every seeded step of the recipe (sampling, shuffling, splits, LM judges)."""
    model: str = DEFAULT_MODEL
    """The model of every LM stage unless a stage names its own."""
    stage_models: dict[str, str] = Field(default_factory=dict)
    """Per-stage models, ``stage=provider/model``."""
    model_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Provider options per model spec (e.g. ``base_url``, ``max_concurrency``)."""
    style: StyleChoice = "auto"
    """Prompt style: chat templates, few-shot completion templates, or by provider."""
    batch_size: int | None = Field(default=None, ge=1)
    """Records per stored batch; by default 8 for local models (the progress bar moves per
    batch), a quarter of the concurrency bound for APIs, at least 8 (records stream on to
    their next stage batch by batch, several batches in flight at once: see
    :mod:`senseforge.pipelines.flow`). A killed run redoes its unstored batches, and the
    cache answers the calls in them that had finished."""
    call_rounds: int = Field(default=3, ge=1)
    """Passes over records whose calls failed transiently before the run stops as incomplete."""
    registry: str | None = None
    """A contamination registry folder (``senseforge registry``): items are checked against the benchmarks in it
    before any model judges them or people review them; ``None``: no check."""
    contamination: ContaminationMode = "auto"
    """What the check does with a copy of a registered item: ``reject`` it, ``flag`` it (it goes on, marked), or
    ``off``; ``auto``: the recipe's own default (reject where items are written anew, flag where they adapt
    existing ones). Cross-lingual matches are only ever flagged."""

    @field_validator("stage_models")
    @classmethod
    def _stages(cls, value: dict[str, str]) -> dict[str, str]:
        for stage, spec in value.items():
            if stage not in cls.lm_stages:
                raise ValueError(f"unknown stage {stage!r} (stages with a model: {', '.join(cls.lm_stages)})")
            parse_spec(spec)
        return value

    @model_validator(mode="before")
    @classmethod
    def _nest_review(cls, raw: Any) -> Any:
        """Flat review settings (``review_k=3``) go into ``review``; a recipe without one refuses them, but
        for those at their default (its older manifests record them)."""
        if not isinstance(raw, dict):
            return raw
        settings = cls.review_settings()
        names = review_names(settings or ReviewSettings)
        flat = {key: value for key, value in raw.items() if key in names and key not in cls.model_fields}
        rest = {key: value for key, value in raw.items() if key not in flat}
        if settings is not None:
            nested = raw.get("review")
            given = nested.model_dump() if isinstance(nested, BaseModel) else dict(nested or {})
            return {**rest, "review": {**given, **{names[key]: value for key, value in flat.items()}}} if flat else raw
        recipe = cls.model_fields["recipe"].default
        hint = cls.unused_hint
        if cls.panel_settings:
            flags = [f"--{name.replace('_', '-')}" for name in cls.panel_settings]
            hint = f"its panels are given by {', '.join(flags[:-1])} and {flags[-1]}" if len(flags) > 1 else flags[0]
        for key, value in flat.items():
            if _jsonish(value) != REVIEW_DEFAULTS.get(key):
                raise ValueError(f"{recipe} does not use {key}{': ' + hint if hint else ''}")
        return rest

    @classmethod
    def review_settings(cls) -> type[ReviewSettings] | None:
        """The model of the recipe's review settings; ``None`` for a recipe without a review."""
        field = cls.model_fields.get("review")
        return None if field is None else typing.cast(type[ReviewSettings], field.annotation)

    @classmethod
    def settings(cls) -> dict[str, FieldInfo]:
        """Every setting by the name it is given by, the review settings flat in place (after ``style``)."""
        review = cls.review_settings()
        out: dict[str, FieldInfo] = {}
        for name, info in cls.model_fields.items():
            if name != "review":
                out[name] = info
            if name == "style" and review is not None:
                out.update(review.flat_fields())
        return out

    def panels(self) -> dict[str, Panel]:
        """The panel each of the recipe's judging stages runs with, by stage (empty: none judges)."""
        return {}

    @model_validator(mode="after")
    def _no_unused(self) -> RecipeConfig:
        for name in self.unused:
            if getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True):
                raise ValueError(
                    f"{self.recipe} does not use {name}{': ' + self.unused_hint if self.unused_hint else ''}"
                )
        return self

    @model_serializer(mode="wrap")
    def _without_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The stored form: :data:`UNSTORED_AT_DEFAULT` settings only when set."""
        return _stored(handler(self))

    def input_changes(self, manifest: Mapping[str, Any]) -> list[str]:
        """What changed, since the run of ``manifest`` started, in inputs outside the config that decide what the
        run makes (the contamination registry; mCSQA: its knowledge store), one phrase each; a resume is refused
        when any did."""
        recorded = manifest.get("contamination")
        if not isinstance(recorded, Mapping) or not self.registry:
            return []
        from senseforge.registry.store import Registry

        now = Registry.open(Path(self.registry)).content_hash()
        if recorded.get("registry_hash") != now:
            return [f"the contamination registry {self.registry} changed (benchmarks added, removed or re-added)"]
        return []

    def model_for(self, stage: str) -> str:
        """The model spec of an LM stage."""
        return self.stage_models.get(stage, self.model)

    def options_for(self, spec: str) -> dict[str, Any]:
        """Provider options of a model spec."""
        return dict(self.model_options.get(spec, {}))

    def style_for(self, stage: str) -> PromptStyle:
        """Chat templates for chat models, few-shot completion for base models (unless set).

        Raises:
            ConfigError: ``style = "chat"`` for a stage whose model has no chat template (a base model).
        """
        spec = self.model_for(stage)
        chat = is_chat(spec, self.options_for(spec))
        if self.style == "chat" and not chat:
            raise ConfigError(
                f"--style chat: {spec} (the {stage} stage's model) has no chat template, it is a base model; "
                "use --style completion or auto (or declare its template: -o chat_format=NAME for llamacpp)"
            )
        if self.style != "auto":
            return self.style
        return "chat" if chat else "completion"

    def batch_for(self, stage: str) -> int:
        """Records per batch of a stage (see :attr:`batch_size`)."""
        if self.batch_size is not None:
            return self.batch_size
        spec = self.model_for(stage) if stage in self.lm_stages else self.model
        if stage == self.review_stage and isinstance(self, ReviewedConfig) and self.review.judges:
            spec = self.review.judges[0]
        if not provider_info(spec).remote:
            return 8
        options = self.options_for(spec)
        if str(options.get("batch", False)).lower() in ("true", "1", "yes", "on"):
            return ONE_BATCH  # through the endpoint's Batch API: the whole stage in one batch
        bound = int(options.get("max_concurrency", 8))
        return max(8, bound // 4)

    def canonical(self) -> str:
        """The config as canonical JSON.

        Settings added after runs already existed (:attr:`LATER_SETTINGS`) are left out while
        at their default, and a recipe without a review counts the review settings at their
        default (:data:`REVIEW_DEFAULTS`), so those runs keep their hash and still resume.
        """
        dumped = self.model_dump(mode="json")
        for name, default in REVIEW_DEFAULTS.items():
            if name not in LATER_SETTINGS:
                dumped.setdefault(name, default)
        for name in LATER_SETTINGS:
            field = type(self).settings().get(name)
            if field is not None and dumped.get(name, _jsonish(field.default)) == _jsonish(field.default):
                dumped.pop(name, None)
        return json.dumps(dumped, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    def hash(self) -> str:
        """SHA-256 of :meth:`canonical`."""
        return hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()


class ReviewedConfig(RecipeConfig):
    """The config of a recipe whose stages include the engine's review: the shared settings and :attr:`review`.

    A recipe with its own review settings (other help, an alias) narrows ``review`` to its subclass of
    :class:`ReviewSettings`.
    """

    review: ReviewSettings = Field(default_factory=ReviewSettings)
    """The review panel: LM judges, their policy, people and their policy."""

    def panels(self) -> dict[str, Panel]:
        """The review's panel (the recipe's review stage runs only when it has one)."""
        return {"review": self.review}

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The review settings flat, after ``style``, where manifests have always held them (and
        :data:`UNSTORED_AT_DEFAULT` settings only when set)."""
        dumped: dict[str, Any] = _stored(handler(self))
        review = dumped.pop("review", {})
        out: dict[str, Any] = {}
        for key, value in dumped.items():
            out[key] = value
            if key == "style":
                out.update(review)
        return out


class PanelledConfig(RecipeConfig):
    """The settings of a verification panel (``--panel``, ``--hard-when``, ``--skip-review-when``), flat, for a
    recipe whose items one may answer; :class:`VerifiedConfig` holds them beside a review, and a recipe without a
    review (culture-adapt) holds them alone."""

    panel: tuple[str, ...] = ()
    """The verification panel: model specs (each optionally ``@loglik``, ``@letter`` or ``@generate``) that each
    answer every item; ``--hard-when`` makes an item Hard from how many answer it right."""
    hard_when: str = "none"
    """When an item is Hard: ``none`` (no member answers right), ``minority`` (fewer than half) or ``at-most:N``."""
    skip_review_when: str = "never"
    """``never``, or ``confident:P``: Hard candidates the panel settles with probability P or more skip review
    (Easy when the members that answer right are that sure; rejected when every member is that sure the marked
    answer is wrong, but for a likely wrong key, which people always see)."""

    @field_validator("panel")
    @classmethod
    def _members_once(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """A member named twice is refused here, so the message is placed at ``--panel`` (the panel's own name for
        its members, ``members``, is no flag)."""
        VerificationPanel(members=value)
        return value

    @model_validator(mode="after")
    def _panel_ok(self) -> Self:
        self.verification_panel()
        return self

    def verification_panel(self) -> VerificationPanel:
        """The verification panel the settings describe (no members: none).

        Raises:
            ConfigError: a policy that does not parse, a member named twice, ``at-most:N`` with N ≥ members.
        """
        return VerificationPanel(members=self.panel, hard_when=self.hard_when, skip_review_when=self.skip_review_when)


class VerifiedConfig(ReviewedConfig, PanelledConfig):
    """The config of a recipe whose items a verification panel may answer (``--panel``): the reviewed recipe's
    settings, and the panel's (:class:`~senseforge.pipelines.panel.VerificationPanel`), flat."""


def review_names(settings: type[ReviewSettings]) -> dict[str, str]:
    """The names review settings are given by flat (their names and other aliases), each with its panel field."""
    names = {flat: name for name, flat in settings.names.items()}
    for name, info in settings.model_fields.items():
        if isinstance(info.validation_alias, AliasChoices):
            names.update({str(choice): name for choice in info.validation_alias.choices if choice != name})
    return names


def _jsonish(value: Any) -> Any:
    """A value as JSON would hold it (tuples as lists), to compare with a JSON default."""
    return [_jsonish(v) for v in value] if isinstance(value, tuple | list) else value


C = TypeVar("C", bound=RecipeConfig)


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``key: old → new`` for every top-level setting that differs."""
    keys = sorted(set(old) | set(new))
    was = {key: old.get(key, REVIEW_DEFAULTS.get(key)) for key in keys}  # a review setting at its default is no
    now = {key: new.get(key, REVIEW_DEFAULTS.get(key)) for key in keys}  # difference, recorded or not
    return [f"{key}: {was[key]!r} → {now[key]!r}" for key in keys if was[key] != now[key]]


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings of a TOML run config (top-level keys are config fields).

    Raises:
        ConfigError: unreadable file or bad TOML, with the file named.
    """
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the run config ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc


def parse_sets(pairs: Sequence[str], model: type[RecipeConfig]) -> dict[str, Any]:
    """``--set key=value`` pairs as settings: JSON values where they parse, comma-separated lists for list fields.

    Raises:
        ConfigError: a pair without ``=`` or a key the config does not have.
    """
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: write key=value, e.g. --set seed=1")
        fields = {**ReviewSettings.flat_fields(), **model.settings()}  # a review setting a recipe lacks: refused by
        if key not in fields:  # the model, naming what the recipe reads instead
            known = ", ".join(name for name in model.settings() if name != "recipe")
            raise ConfigError(f"--set {pair!r}: {model.__name__} has no setting {key!r} (settings: {known})")
        settings[key] = _set_value(value.strip(), _is_list(fields[key]))
    return settings


def _is_list(field: FieldInfo) -> bool:
    """Whether a field holds a list of strings (``--set reviewers=a,b`` splits at commas)."""
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation, args = args[0], list(typing.get_args(args[0]))
    return typing.get_origin(annotation) in (tuple, list) and set(args) <= {str, Ellipsis}


def _set_value(value: str, as_list: bool) -> Any:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    if as_list and isinstance(parsed, str):
        return [part.strip() for part in parsed.split(",") if part.strip()]
    return parsed


def resolve_config(
    model: type[C],
    *,
    recorded: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    sets: Sequence[str] = (),
    flags: Mapping[str, Any] | None = None,
) -> C:
    """The config of a run from its sources (manifest < file < ``--set`` < flags).

    ``model_options`` given without a model spec (``-o key=value``) belong to the run's ``model``.

    Raises:
        ConfigError: the first invalid setting, named as its flag.
    """
    settings: dict[str, Any] = dict(recorded or {})
    sources: dict[str, str] = {key: "the run's manifest" for key in settings}
    if config_file is not None:
        from_file = read_config_file(config_file)
        settings.update(from_file)
        sources.update({key: f"{config_file}: {key}" for key in from_file})
    from_sets = parse_sets(sets, model)
    settings.update(from_sets)
    sources.update({key: f"--set {key}" for key in from_sets})
    given = dict(flags or {})
    if "model_options" in given:
        default = model.model_fields["model"].default
        spec = given.get("model", settings.get("model", default))
        merged = dict(settings.get("model_options") or {})
        merged[spec] = {**merged.get(spec, {}), **given.pop("model_options")}
        given["model_options"] = merged
    settings.update(given)
    sources.update({key: f"--{key.replace('_', '-')}" for key in given})
    settings.setdefault("recipe", model.model_fields["recipe"].default)
    try:
        return model.model_validate(settings)
    except ValidationError as exc:
        raise ConfigError(_config_error(exc, model, sources)) from exc


def _config_error(exc: ValidationError, model: type[RecipeConfig], sources: Mapping[str, str]) -> str:
    """The first invalid setting in one line, named where it came from (the file and key, ``--set``, the
    flag), with the closest real setting for one the recipe does not have."""
    first = exc.errors()[0]
    review = model.review_settings()
    if first["loc"][:1] == ("review",) and review is not None:  # named flat, as given
        loc: tuple[int | str, ...] = tuple(review.given_as(str(part)) for part in first["loc"][1:2])
    else:
        loc = tuple(first["loc"])
    key = str(loc[0]) if loc else ""
    message = str(first["msg"]).removeprefix("Value error, ")
    where = sources.get(key, f"--{key.replace('_', '-')}" if key else "")
    recipe = model.model_fields["recipe"].default
    if first["type"] == "extra_forbidden":
        known = [name for name in model.settings() if name != "recipe"]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f" (settings: {', '.join(known)})"
        return f"{where}: {recipe} has no setting {key!r}{hint}"
    if first["type"] == "missing":
        return f"{where}: required, and not given" if where else message
    return f"{where}: {message}" if where else message
