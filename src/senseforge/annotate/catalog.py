"""Keeping the app's catalogues: extract its strings, update every language's ``.po``, check them.

``python -m senseforge.annotate.catalog update`` (``make i18n``) extracts the strings by
``locale/babel.cfg`` (the templates' ``_()`` / ``{% trans %}``, the modules' :func:`~senseforge.annotate.i18n.N_`)
and those of every registered task type's form (instructions, shown titles, field titles,
option texts), writes ``locale/messages.pot``, and merges it into each language's
``messages.po``: new strings arrive empty (or fuzzy, matched to a similar old one) for a
translator to fill; English's catalogue is the msgids themselves. ``… check`` (``make
i18n-check``, and ``tests/annotate/test_catalog.py``) lists what stops a release: a string
missing, untranslated or fuzzy in a shipped catalogue, a translation whose placeholders differ
from its msgid, and text written into a template without ``_()`` around it
(:func:`unwrapped_text`).
"""

from __future__ import annotations

import copy
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import jinja2
from babel.messages import frontend
from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

from senseforge.annotate.i18n import DOMAIN, LOCALE_DIR, SOURCE_LANGUAGE, languages, po_path
from senseforge.annotate.tasktypes import TASK_TYPES

PACKAGE_DIR = Path(__file__).parent
TEMPLATES_DIR = PACKAGE_DIR / "templates"
CONFIG = LOCALE_DIR / "babel.cfg"
POT = LOCALE_DIR / f"{DOMAIN}.pot"
HEADER = (
    "# The words of senseforge's annotation app (senseforge/annotate), extracted by `make i18n`.\n"
    "# Distributed under the project's licence (MIT)."
)
_STAMPS = ('"POT-Creation-Date:', '"PO-Revision-Date:')


def _mapping() -> tuple[list[tuple[str, str]], dict[str, dict[str, str]]]:
    parse = getattr(frontend, "parse_mapping_cfg", None) or frontend.parse_mapping
    with CONFIG.open(encoding="utf-8") as config:
        method_map, options_map = parse(config)
    return list(method_map), dict(options_map)


def _form_strings() -> Iterator[tuple[str, str]]:
    """(string, where) of every registered task type's form: what a page built from the form shows."""
    for name, task in TASK_TYPES.items():
        form = task.form
        where = f"the form of task type {name}"
        yield form.instructions, where
        for shown in form.shown:
            yield shown.title, where
        for field in form.fields:
            yield field.title, where
            yield from ((rule.problem, where) for rule in (field.required_when, field.only_when) if rule is not None)
            yield from ((text, where) for text in field.option_texts)
            if not field.option_texts and field.kind in ("choice", "multi-choice", "flags"):
                # values in lower-case words, as a page shows them (dashes and underscores as spaces); not labels
                # (A, B, …) or names (CRoW's relations), which stay as they are
                for option in field.options:
                    if option.islower():
                        yield option.replace("-", " ").replace("_", " "), where
        note = getattr(task, "page_note", None)
        if isinstance(note, str):
            yield note, where


def extract() -> Catalog:
    """A fresh template catalogue of every string the app shows, sorted by msgid."""
    catalog = Catalog(
        project="senseforge",
        domain=DOMAIN,
        charset="utf-8",
        fuzzy=False,
        header_comment=HEADER,
        copyright_holder="senseforge developers",
        msgid_bugs_address="",
    )
    method_map, options_map = _mapping()
    for filename, lineno, message, comments, context in extract_from_dir(PACKAGE_DIR, method_map, options_map):
        catalog.add(message, None, [(filename, lineno)], auto_comments=comments, context=context)
    for text, where in _form_strings():
        if re.search(r"[^\W\d_]", text):  # words, not numbers
            catalog.add(text, None, auto_comments=[where])
    return catalog


def _text(catalog: Catalog) -> str:
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=120, sort_output=True, include_previous=True)
    return buffer.getvalue().decode("utf-8")


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file says the same but for its dates (a run that changes nothing changes no file)."""

    def body(content: str) -> list[str]:
        return [line for line in content.splitlines() if not line.startswith(_STAMPS)]

    if path.is_file() and body(path.read_text(encoding="utf-8")) == body(text):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return True


def read(lang: str) -> Catalog:
    """The catalogue of ``lang`` as shipped (an empty one when it has none)."""
    path = po_path(lang)
    if not path.is_file():
        return Catalog(locale=lang, domain=DOMAIN)
    with path.open("rb") as source:
        return read_po(source, locale=lang, domain=DOMAIN)


def update() -> list[Path]:
    """Write ``messages.pot`` and merge it into every language's catalogue (English's made if missing); what changed."""
    template = extract()
    changed = [POT] if _write_if_changed(POT, _text(template)) else []
    for lang in dict.fromkeys((SOURCE_LANGUAGE, *languages())):
        catalog = read(lang)
        catalog.update(copy.deepcopy(template), update_creation_date=False)  # update() adopts the template's entries
        catalog.obsolete.clear()
        if lang == SOURCE_LANGUAGE:  # the msgids are English: its catalogue says them as they are
            for message in catalog:
                if message.id:
                    message.string = message.id
                    message.flags.discard("fuzzy")
                    message.previous_id = []
        if _write_if_changed(po_path(lang), _text(catalog)):
            changed.append(po_path(lang))
    return changed


def problems(lang: str, template: Catalog | None = None) -> list[str]:
    """What is wrong with ``lang``'s catalogue against a fresh extraction: missing, untranslated, fuzzy, mismatched."""
    fresh = template if template is not None else extract()
    catalog = read(lang)
    found: list[str] = []
    for message in fresh:
        if not message.id:
            continue
        entry = catalog.get(message.id, context=message.context)
        text = message.id if isinstance(message.id, str) else message.id[0]
        if entry is None:
            found.append(f"{lang}: missing {text!r} (run `make i18n`, then translate it)")
        elif not entry.string or (isinstance(entry.string, tuple) and not all(entry.string)):
            found.append(f"{lang}: untranslated {text!r}")
        elif entry.fuzzy:
            found.append(f"{lang}: fuzzy {text!r} (check the translation, then drop the fuzzy flag)")
    for message, errors in catalog.check():
        found.extend(f"{lang}: {message.id!r}: {error}" for error in errors)
    return found


_SCRIPT = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)
_UNTRANSLATED = re.compile(r"<(kbd|code)\b[^>]*>.*?</\1>", re.S | re.I)
"""Text in these stays as written: key caps, commands."""
_ATTRIBUTE = re.compile(r"""\b(title|aria-label|placeholder|alt)\s*=\s*"([^"]*)\"""", re.I)
_ALLOWED = re.compile(r"\bsenseforge(?: annotate)?\b|[\w.-]*\.jsonl\b|\(\)\s*=>\s*\w+\(")
"""Words that stay as written: the app's name, file names, and the bindKeys entries a macro writes (code)."""
_TAG = re.compile(r"<[^>]*>")
_ENTITY = re.compile(r"&[#\w]+;")
_WORD = re.compile(r"[^\W\d_]+")
_JINJA = "\x00"


def unwrapped_text(source: str) -> list[str]:
    """The words a template writes as plain text, where a translation cannot reach them.

    The template's literal text (what lies outside ``{{ }}``, ``{% %}``, comments and ``{% trans %}`` blocks), less
    scripts, styles, ``<kbd>`` and ``<code>``, is read as HTML: any word left in its text or in
    a ``title``, ``aria-label``, ``placeholder`` or ``alt`` is reported (but for :data:`_ALLOWED`).
    """
    env = jinja2.Environment(extensions=["jinja2.ext.i18n"])
    parts, in_trans, opened = [], False, False
    for _line, kind, value in env.lex(source):
        if kind == "block_begin":
            opened = True
        elif kind == "name" and opened:
            in_trans = value in ("trans", "pluralize") or (in_trans and value != "endtrans")
            opened = False
        elif kind not in ("whitespace",):
            opened = opened and kind == "block_begin"
        parts.append(value if kind == "data" and not in_trans else _JINJA)  # a trans block's text is in the catalogue
    html = "".join(parts)
    html = _SCRIPT.sub(" ", html)
    html = _ALLOWED.sub(" ", _UNTRANSLATED.sub(" ", html))
    found = [value for _name, value in _ATTRIBUTE.findall(html) if _WORD.search(value.replace(_JINJA, " "))]
    text = _ENTITY.sub(" ", _TAG.sub(" ", html.replace(_JINJA, " ")))
    found.extend(" ".join(chunk.split()) for chunk in re.split(r"\s{2,}|\n", text) if _WORD.search(chunk))
    return found


def unwrapped() -> dict[str, list[str]]:
    """Every template's unwrapped text (:func:`unwrapped_text`), by template name; only templates with some."""
    found = {}
    for path in sorted(TEMPLATES_DIR.glob("*.html")):
        words = unwrapped_text(path.read_text(encoding="utf-8"))
        if words:
            found[path.name] = words
    return found


def main(argv: list[str] | None = None) -> int:
    """``update`` (extract and merge) or ``check`` (report what stops a release; exit 1 when anything does)."""
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "check"
    if command == "update":
        for path in update():
            print(f"wrote {path}")
        return 0
    if command != "check":
        print("usage: python -m senseforge.annotate.catalog [update|check]", file=sys.stderr)
        return 2
    template = extract()
    found = [f"{name}: not wrapped for translation: {text!r}" for name, texts in unwrapped().items() for text in texts]
    for lang in languages():
        found.extend(problems(lang, template))
    for line in found:
        print(line)
    print(f"{len(found)} problem(s) in {', '.join(languages())}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["extract", "main", "problems", "read", "unwrapped", "unwrapped_text", "update"]
