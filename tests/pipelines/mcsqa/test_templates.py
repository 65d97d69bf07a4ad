"""mCSQA prompt templates: every language builds every stage in both styles, and the parsers
take what models really return and refuse what is unusable."""

from __future__ import annotations

import re

import pytest

from senseforge.data.schema import QuestionSet
from senseforge.errors import ConfigError
from senseforge.llm.base import GenerateRequest, PromptStyle
from senseforge.pipelines.mcsqa import parse as P
from senseforge.pipelines.mcsqa import templates as T

LANGS = T.SUPPORTED_LANGUAGES

# A question set per language: anchor and three targets not taken from the few-shot examples.
QS_WORDS: dict[str, tuple[str, list[str]]] = {
    "en": ("bread", ["bakery", "oven", "toaster"]),
    "ja": ("パン", ["パン屋", "オーブン", "トースター"]),
    "zh": ("面包", ["面包店", "烤箱", "烤面包机"]),
    "de": ("Brot", ["Bäckerei", "Ofen", "Toaster"]),
    "pt": ("pão", ["padaria", "forno", "torradeira"]),
    "nl": ("brood", ["bakkerij", "oven", "broodrooster"]),
    "fr": ("pain", ["boulangerie", "four", "grille-pain"]),
    "ru": ("хлеб", ["пекарня", "духовка", "тостер"]),
    "id": ("roti", ["toko roti", "oven", "pemanggang roti"]),
    "su": ("roti", ["toko roti", "oven", "panggang roti"]),
}


def _qs(lang: str) -> QuestionSet:
    anchor, targets = QS_WORDS[lang]
    return QuestionSet(
        id=f"qs-{lang}", lang=lang, anchor=anchor, relation="AtLocation", direction="forward", targets=targets
    )


def _text(request: GenerateRequest) -> str:
    if request.prompt is not None:
        return request.prompt
    return "\n".join(m.content for m in request.as_messages())


def _build(stage: str, lang: str, style: PromptStyle) -> GenerateRequest:
    qs = _qs(lang)
    answer = qs.targets[1]
    if stage == "generate":
        return T.build_generate(qs, answer, style=style)
    if stage == "refine":
        return T.build_refine("QUESTION-TO-REFINE?", answer, qs.targets, lang, style)
    return T.build_distractors(qs.targets, lang, style)


def test_supported_languages() -> None:
    assert set(LANGS) >= {"en", "ja", "zh", "de", "pt", "nl", "fr", "ru", "id", "su"}
    for lang in LANGS:
        assert T.templates(lang).lang == lang


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("stage", T.STAGES)
@pytest.mark.parametrize("style", T.STYLES)
def test_every_language_stage_and_style_builds(lang: str, stage: str, style: PromptStyle) -> None:
    request = _build(stage, lang, style)
    text = _text(request)
    qs = _qs(lang)
    assert not re.search(r"\{(anchor|answer|wrong|words|choices|question)\}", text), "unfilled placeholder"
    for target in qs.targets:
        assert target in text
    if stage == "generate":
        assert qs.anchor in text
    if stage == "refine":
        assert "QUESTION-TO-REFINE?" in text
    if stage == "distractors":
        assert "QUESTION-TO-REFINE" not in text
    sampling = T.DEFAULT_SAMPLING[stage]  # type: ignore[index]
    assert (request.temperature, request.top_p, request.seed) == (sampling.temperature, sampling.top_p, sampling.seed)
    if style == "chat":
        assert request.messages is not None
        assert [m.role for m in request.messages] == ["system", "user"]
        assert request.json_mode is (stage == "distractors")
        assert request.stop == ()
    else:
        assert request.prompt is not None and request.messages is None
        assert request.stop == ("\n",)
        assert not request.prompt.endswith((" ", "\n"))


@pytest.mark.parametrize("lang", LANGS)
def test_generate_names_the_answer_as_the_only_right_one(lang: str) -> None:
    qs = _qs(lang)
    for answer in qs.targets:
        wrong = [t for t in qs.targets if t != answer]
        for style in T.STYLES:
            text = _text(T.build_generate(qs, answer, style=style))
            # the wrong answers appear together, as a list, without the answer
            assert T._json_list(wrong) in text
            assert T._json_list(qs.targets) in text or style == "completion"


@pytest.mark.parametrize("lang", LANGS)
def test_completion_prompts_hold_two_worked_examples(lang: str) -> None:
    t = T.templates(lang)
    lb = t.labels
    colon = t.colon
    generate = _build("generate", lang, "completion").prompt
    refine = _build("refine", lang, "completion").prompt
    distractors = _build("distractors", lang, "completion").prompt
    assert generate is not None and refine is not None and distractors is not None

    def lines_starting(prompt: str, label: str) -> int:
        return sum(line.startswith(f"{label}{colon.rstrip()}") for line in prompt.splitlines())

    # two example blocks plus the open target block
    assert lines_starting(generate, lb.question) == 3
    assert generate.endswith(f"{lb.question}{colon.rstrip()}")
    for g in t.generate.examples:
        assert f"{lb.question}{colon}{g.question}" in generate
    assert lines_starting(refine, lb.natural) == 3
    assert refine.endswith(f"{lb.natural}{colon.rstrip()}")
    for r in t.refine.examples:
        assert f"{lb.natural}{colon}{r.natural}" in refine
    assert distractors.count('{"distractors": ["') == 2
    assert distractors.endswith(T.DISTRACTORS_PREFIX)
    assert lines_starting(distractors, lb.choices) == 3


@pytest.mark.parametrize("lang", LANGS)
def test_few_shot_examples_keep_the_recipe_rules(lang: str) -> None:
    t = T.templates(lang)
    for g in t.generate.examples:
        words = [g.answer, *g.wrong]
        assert len(set(words)) == 3
        assert not any(w.casefold() in g.question.casefold() for w in words), g.question
        assert g.question.endswith(("?", "？"))
    refine = t.refine.examples
    assert refine[0].question == refine[0].natural, "one example is kept word for word"
    assert refine[1].question != refine[1].natural, "one example is rewritten"
    for r in refine:
        assert r.answer in r.choices
        assert r.natural.endswith(("?", "？"))
        assert not any(c.casefold() in r.natural.casefold() for c in r.choices), r.natural
    for d in t.distractors.examples:
        assert len(set(d.choices) | set(d.distractors)) == 5
    # the examples' outputs must survive our own parsers
    for g in t.generate.examples:
        assert P.parse_question(g.question, lang) == g.question
    for d in t.distractors.examples:
        assert P.parse_distractors(f'{{"distractors": ["{d.distractors[0]}", "{d.distractors[1]}"]}}') == list(
            d.distractors
        )


def test_template_hashes_are_stable_and_distinct() -> None:
    hashes = {
        (stage, lang, style): T.template_hash(stage, lang, style)
        for stage in T.STAGES
        for lang in LANGS
        for style in T.STYLES
    }
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes.values())
    assert len(set(hashes.values())) == len(hashes)
    assert T.template_hash("generate", "en", "chat") == hashes[("generate", "en", "chat")]
    # the hash is a pure function of the template, not of the process
    assert T.template_hash("refine", "pt-BR", "completion") == hashes[("refine", "pt", "completion")]


def test_template_text_is_the_unfilled_template() -> None:
    chat = T.template_text("generate", "en", "chat")
    assert chat.startswith("[system]\n") and "{answer}" in chat and "{words}" in chat
    completion = T.template_text("distractors", "ja", "completion")
    assert "{choices}" in completion and completion.endswith(T.DISTRACTORS_PREFIX)


def test_language_tags_resolve_to_their_primary_language() -> None:
    assert T.resolve_language("pt-BR") == "pt"
    assert T.resolve_language("EN") == "en"
    assert T.resolve_language("zh-Hans-CN") == "zh"
    qs = _qs("pt").model_copy(update={"lang": "pt-BR"})
    assert "padaria" in _text(T.build_generate(qs, "padaria"))


@pytest.mark.parametrize("lang", ["ko", "sw", "zh-Hant", "zh-TW", "english", ""])
def test_unsupported_language_is_a_config_error_naming_the_supported_ones(lang: str) -> None:
    with pytest.raises(ConfigError) as info:
        T.build_distractors(["a", "b", "c"], lang)
    assert "en, ja, zh" in str(info.value)


def test_bad_arguments() -> None:
    qs = _qs("en")
    with pytest.raises(ValueError, match="not one of"):
        T.build_generate(qs, "kitchen")
    with pytest.raises(ValueError, match="not one of"):
        T.build_refine("Where?", "kitchen", qs.targets, "en")
    with pytest.raises(ValueError, match="empty"):
        T.build_refine("  ", "oven", qs.targets, "en")
    with pytest.raises(ValueError, match="three distinct"):
        T.build_distractors(["a", "b"], "en")
    with pytest.raises(ValueError, match="three distinct"):
        T.build_distractors(["a", "a", "b"], "en")
    with pytest.raises(ConfigError, match="style"):
        T.build_distractors(["a", "b", "c"], "en", "instruct")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="stage"):
        T.template_hash("verify", "en", "chat")


def test_overrides_and_value_hygiene() -> None:
    qs = _qs("en")
    request = T.build_generate(qs, "oven", sampling=T.Sampling(temperature=0.3, top_p=0.9, seed=7), max_tokens=40)
    assert (request.temperature, request.top_p, request.seed, request.max_tokens) == (0.3, 0.9, 7, 40)
    # a value with a newline or a placeholder-looking text cannot break the block layout
    request = T.build_refine("Where\nis {answer} kept?", "oven", qs.targets, "en", "completion")
    assert request.prompt is not None
    assert request.prompt.endswith("Question: Where is {answer} kept?\nNatural question:")


# --------------------------------------------------------------------------- parse_question


@pytest.mark.parametrize(
    ("text", "lang", "expected"),
    [
        (" Where do people buy fresh bread?", "en", "Where do people buy fresh bread?"),
        ("Where do people buy fresh bread?\nAnswer: bakery", "en", "Where do people buy fresh bread?"),
        ('Question: "Where do people buy fresh bread?"', "en", "Where do people buy fresh bread?"),
        ("**Question:** Where do people buy fresh bread?", "en", "Where do people buy fresh bread?"),
        ("Sure! Here is the question:\n\nWhere do people buy fresh bread?", "en", "Where do people buy fresh bread?"),
        ("```\nWhere do people buy fresh bread?\n```", "en", "Where do people buy fresh bread?"),
        ("質問：「焼きたてのパンはどこで買えますか？」", "ja", "焼きたてのパンはどこで買えますか？"),
        ("自然的问题：人们在哪里买新鲜的面包？", "zh", "人们在哪里买新鲜的面包？"),
        ("Question : Où achète-t-on du pain frais ?", "fr", "Où achète-t-on du pain frais ?"),
        ("« Où achète-t-on du pain frais ? »", "fr", "Où achète-t-on du pain frais ?"),
        ("Вопрос: Где покупают свежий хлеб?", "ru", "Где покупают свежий хлеб?"),
        ("Pertanyaan: Di mana orang membeli roti segar?", "id", "Di mana orang membeli roti segar?"),
        # no question mark is still a question for the parser; the rule filter judges it
        ("Where people buy bread", "en", "Where people buy bread"),
    ],
)
def test_parse_question_good(text: str, lang: str, expected: str) -> None:
    assert P.parse_question(text, lang) == expected


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("", "en"),
        ("   \n\n ", "en"),
        ("I'm sorry, but I can't help with that.", "en"),
        ("I’m sorry, I cannot create that question.", "en"),
        ("申し訳ありませんが、その質問は作成できません。", "ja"),
        ("抱歉，我无法完成这个请求。", "zh"),
        ("Es tut mir leid, das kann ich nicht.", "de"),
        ("Désolé, je ne peux pas faire cela.", "fr"),
        ("К сожалению, я не могу помочь.", "ru"),
        ("Maaf, saya tidak bisa membuat pertanyaan itu.", "id"),
        ("Hapunten, abdi teu tiasa.", "su"),
        ("Sorry, I cannot do that.", "ja"),  # English refusals count in every language
        ("???", "en"),
        ('""', "en"),
        ("Question:", "en"),
    ],
)
def test_parse_question_bad(text: str, lang: str) -> None:
    assert P.parse_question(text, lang) is None


def test_parse_question_unknown_language() -> None:
    with pytest.raises(ConfigError):
        P.parse_question("Where?", "ko")


# --------------------------------------------------------------------------- parse_distractors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"distractors": ["pond", "restaurant"]}', ["pond", "restaurant"]),
        ('```json\n{"distractors": ["pond", "restaurant"]}\n```', ["pond", "restaurant"]),
        ('Here are two more:\n{"distractors": ["pond", "restaurant"],}\nHope this helps!', ["pond", "restaurant"]),
        ('"pond", "restaurant"]}', ["pond", "restaurant"]),  # continuation of a completion prompt
        (' "池", "レストラン"]}\n', ["池", "レストラン"]),
        ("{'additional_choice': ['pond', 'restaurant']}".replace("'", '"'), ["pond", "restaurant"]),
        ('["pond", "restaurant"]', ["pond", "restaurant"]),
        ('{"a": "pond", "b": "restaurant"}', ["pond", "restaurant"]),
        ('{"distractors": ["pond", "restaurant", "lake"]}', ["pond", "restaurant"]),
        ('{"distractors": [" pond ", "Pond", "restaurant"]}', ["pond", "restaurant"]),
        ("pond\nrestaurant", ["pond", "restaurant"]),
        ("1. pond\n2. restaurant", ["pond", "restaurant"]),
        ("Two more choices:\n- pond\n- restaurant\nThese fit the style!", ["pond", "restaurant"]),
        ("Distractors: pond, restaurant", ["pond", "restaurant"]),
        ("池塘、餐厅", ["池塘", "餐厅"]),
        ('"pond"\n"restaurant."', ["pond", "restaurant"]),
    ],
)
def test_parse_distractors_good(text: str, expected: list[str]) -> None:
    assert P.parse_distractors(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  \n ",
        '{"distractors": ["pond"]}',
        '{"distractors": []}',
        '{"distractors": ["pond", "pond"]}',
        '"pond"]}',
        "pond",
        "I'm sorry, but I can't help with that.",
        "Sorry, I cannot do that.\nMaybe another time.",
        "申し訳ありませんが、お手伝いできません。",
        "К сожалению, я не могу,\nэто запрещено.",
        '{"distractors": "pond, restaurant"}',
        "Here is a long explanation of why these choices would be good for the quiz.",
    ],
)
def test_parse_distractors_bad(text: str) -> None:
    assert P.parse_distractors(text) is None


@pytest.mark.parametrize("style", ["chat", "completion"])
def test_only_the_distractors_request_carries_a_reply_shape_and_json_mode_stays_as_it_was(style: PromptStyle) -> None:
    qs = _qs("en")
    distractors = T.build_distractors(qs.targets, "en", style)
    assert distractors.reply_shape == T.DISTRACTORS_SHAPE
    assert distractors.json_mode == (style == "chat")
    assert T.build_generate(qs, qs.targets[0], "en", style).reply_shape is None
    schema = T.DISTRACTORS_SHAPE.as_schema()
    assert schema is not None and schema["properties"]["distractors"]["minItems"] == 2


def test_a_distractors_reply_in_its_shape_parses_from_a_chat_and_after_a_completion_page() -> None:
    reply = T.DistractorsReply(distractors=["pond", "lake"]).model_dump_json()
    assert P.parse_distractor_json(reply) == ["pond", "lake"]
    assert P.parse_distractor_items(reply) == ["pond", "lake"]  # the whole object after the page's opening
    assert P.parse_distractor_json('{"distractors": ["pond"]}') == ["pond"]  # outside the shape: read as before
