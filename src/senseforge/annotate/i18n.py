"""The annotation app's words in the annotators' languages: a gettext catalogue per language.

The catalogue is ``locale/<lang>/LC_MESSAGES/messages.po`` beside this module, one file per
language; the languages there are the languages there are (:func:`languages`): dropping in
``locale/su/LC_MESSAGES/messages.po`` adds Sundanese, with no code to change. English is the
language of the source (every ``msgid``), so a page in a language without a catalogue, or a
string its catalogue lacks, reads in English.

The ``.po`` files are the only form shipped: :func:`translations` compiles one in memory
(Babel's ``pofile`` and ``mofile``) the first time a language is asked for, leaving out fuzzy
entries. No compiled ``.mo`` is committed or built, so a ``pip install`` from the sources or
a wheel needs no build step and a ``.po`` can never disagree with a stale ``.mo``; compiling
the few hundred entries takes milliseconds, once per process and language.

``messages.pot`` (the template every catalogue follows) is written by
:mod:`senseforge.annotate.catalog` (``make i18n``), which extracts the strings of the
templates (``{{ _("…") }}``, ``{% trans %}``), of the app's messages (marked with :func:`N_`)
and of every registered task type's form.
"""

from __future__ import annotations

import functools
import io
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from senseforge.errors import ConfigError

if TYPE_CHECKING:
    from babel.support import Translations

LOCALE_DIR = Path(__file__).with_name("locale")
"""Where the catalogues live: ``<lang>/LC_MESSAGES/messages.po`` and the template ``messages.pot``."""
DOMAIN = "messages"
SOURCE_LANGUAGE = "en"
"""The language of every ``msgid``: what a page falls back to."""
_LANG = re.compile(r"^[a-z]{2,3}(?:_[A-Z]{2})?$")


def N_(message: str) -> str:  # the gettext convention's name for "mark now, translate later"
    """Mark ``message`` for the catalogue without translating it (the page translates it when shown)."""
    return message


class Said(str):
    """A message in English that remembers its msgid and values, so that a page can say it in another language.

    It is the English text wherever a string is wanted (a JSON error, a log); :func:`translate`
    formats the translated msgid with the same values. Mark the msgid with :func:`N_` for the
    catalogue: ``Said(N_("no task type %(name)s"), name=repr(name))``.
    """

    msgid: str
    values: dict[str, object]

    def __new__(cls, msgid: str, **values: object) -> Said:
        said = super().__new__(cls, msgid % values if values else msgid)
        said.msgid = msgid
        said.values = values
        return said


def po_path(lang: str) -> Path:
    """The catalogue file of ``lang``."""
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def languages() -> tuple[str, ...]:
    """The languages the app speaks: English, then every language with a catalogue, by code."""
    found = {p.parent.parent.name for p in LOCALE_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.po")}
    found = {lang for lang in found if _LANG.match(lang)}
    return (SOURCE_LANGUAGE, *sorted(found - {SOURCE_LANGUAGE}))


def check_language(lang: str) -> str:
    """``lang`` when the app speaks it.

    Raises:
        ConfigError: it does not, with the languages it does.
    """
    known = languages()
    if lang not in known:
        raise ConfigError(
            f"no interface language {lang!r}: available are {', '.join(known)} "
            f"(a language is added as {LOCALE_DIR.name}/<code>/LC_MESSAGES/{DOMAIN}.po in senseforge/annotate)"
        )
    return lang


def html_lang(lang: str) -> str:
    """The BCP 47 tag of a catalogue's language code (``pt_BR`` → ``pt-BR``) for ``<html lang>``."""
    return lang.replace("_", "-")


def language_name(lang: str) -> str:
    """A language's name in that language, from CLDR (``id`` → ``Indonesia``); the code when CLDR has none."""
    from babel import Locale, UnknownLocaleError

    try:
        name = Locale.parse(lang).get_display_name(lang)
    except (ValueError, UnknownLocaleError):
        return lang
    return name[:1].upper() + name[1:] if name else lang


_compiling = threading.Lock()


@functools.cache
def translations(lang: str) -> Translations:
    """The compiled catalogue of ``lang``, fuzzy entries left out (a string it lacks stays its English msgid).

    Raises:
        ConfigError: the app does not speak ``lang``.
    """
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po
    from babel.support import NullTranslations, Translations

    check_language(lang)
    path = po_path(lang)
    if not path.is_file():  # the source language needs no catalogue
        return Translations(fp=None, domain=DOMAIN)  # an empty one: msgids pass through
    with _compiling:
        with path.open("rb") as source:
            catalog = read_po(source, locale=lang, domain=DOMAIN)
        compiled = io.BytesIO()
        write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    found = Translations(fp=compiled, domain=DOMAIN)
    assert isinstance(found, NullTranslations)
    return found


def translate(found: Any, text: object) -> str:
    """``text`` in the catalogue's language, as plain text (escaped when shown), or unchanged when it has no entry.

    For strings the page gets as values (a form's title, an error's message): a template's own
    strings go through ``_()``, which marks the translation safe markup; these may carry
    untrusted parts, so they stay text.
    """
    if not isinstance(text, str) or not text:
        return "" if text is None else str(text)
    if isinstance(text, Said) and text.values:
        try:
            values = {key: translate(found, v) if isinstance(v, Said) else v for key, v in text.values.items()}
            return str(found.ugettext(text.msgid)) % values
        except (KeyError, ValueError, TypeError):  # a translation with other placeholders: the English stands
            return str(text)
    return str(found.ugettext(text))


__all__ = [
    "DOMAIN",
    "LOCALE_DIR",
    "N_",
    "SOURCE_LANGUAGE",
    "Said",
    "check_language",
    "html_lang",
    "language_name",
    "languages",
    "po_path",
    "translate",
    "translations",
]
