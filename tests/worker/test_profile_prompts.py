"""The exact prompt every named profile builds, with and without controls, for several language pairs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jinja2
import pytest

from contract.controls import Formality
from contract.errors import UnrunnableJobError, UnsupportedControlError
from contract.schemas import JobSpec
from worker.deterministic_engine import CharTokenizer
from worker.profiles import (
    PROFILES,
    ChatProfile,
    FewShotProfile,
    Gemma3Profile,
    HunyuanMtProfile,
    HyMt15Profile,
    IdentityProfile,
    Llama3Profile,
    Qwen3Profile,
    Sampling,
    SeedXProfile,
    TemplateProfile,
    TowerPlusProfile,
    TranslateGemmaProfile,
)

# A chat template in the style of the real ones: Qwen3's honours enable_thinking; TranslateGemma's
# takes one structured item and, like the real one, refuses a plain string.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>"
    "{% if m.content is string %}{{ m.content }}"
    "{% else %}{% set c = m.content[0] %}[{{ c.source_lang_code }}->{{ c.target_lang_code }}] {{ c.text }}{% endif %}"
    "<|end|>{% endfor %}<|assistant|>"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}"
)
STRUCTURED_ONLY = (
    "{% for m in messages %}{% if m.content is string %}{{ raise_exception('content must be a list') }}{% endif %}"
    "{% set c = m.content[0] %}<start_of_turn>user\n{{ c.source_lang_code }}>{{ c.target_lang_code }}: {{ c.text }}"
    "<end_of_turn>\n{% endfor %}<start_of_turn>model\n"
)


class TemplateTokenizer(CharTokenizer):
    """A character tokenizer whose chat template is rendered with Jinja2, as transformers does."""

    bos_token_id = 2

    def __init__(self, chat_template: str | None = CHAT_TEMPLATE) -> None:
        self.chat_template = chat_template

    def get_vocab(self) -> dict[str, int]:
        return {"\n": 10}

    def apply_chat_template(self, messages: Sequence[dict[str, Any]], **kwargs: Any) -> str:
        assert kwargs.pop("tokenize") is False and kwargs.pop("add_generation_prompt") is True

        def raise_exception(message: str) -> None:
            raise jinja2.TemplateError(message)

        environment = jinja2.Environment(keep_trailing_newline=True)  # as transformers renders
        environment.globals["raise_exception"] = raise_exception
        assert self.chat_template is not None
        return environment.from_string(self.chat_template).render(messages=messages, **kwargs)


def spec(text: str, source: str = "en", target: str = "fr", **controls: Any) -> JobSpec:
    return JobSpec(
        job_id="00000000-0000-4000-8000-000000000000",
        text=text,
        source_lang=source,
        target_lang=target,
        created_at=0.0,
        **controls,
    )


def test_every_named_profile_is_registered() -> None:
    assert set(PROFILES) == {
        "few-shot",
        "chat",
        "qwen3",
        "gemma3",
        "llama3",
        "translategemma",
        "hunyuan-mt",
        "hy-mt1.5",
        "seed-x",
        "tower-plus",
        "identity",
    }


# Few-shot (base models) ----------------------------------------------------------------------


def test_few_shot_puts_context_and_the_glossary_terms_in_the_text_before_the_source_line() -> None:
    job = spec(
        "The cat sleeps on the sofa.",
        glossary={"cat": "chat", "dog": "chien", "Sofa": "canapé"},
        context="A story\nabout pets.",
    )
    prompt = FewShotProfile(TemplateTokenizer(None)).build_prompt(job)
    assert prompt.endswith(
        "French: Je voudrais une tasse de café, s'il vous plaît.\n\n"
        "Context (not to translate): A story about pets.\n"
        "Terms: cat = chat; Sofa = canapé\n"
        "English: The cat sleeps on the sofa.\nFrench:"
    )


@pytest.mark.parametrize(
    ("source", "target", "prompt"),
    [
        (
            "zh",
            "en",
            "Chinese: 今天天气很好。\nEnglish: The weather is nice today.\n\n"
            "Chinese: 火车站在哪里？\nEnglish: Where is the train station?\n\n"
            "Chinese: 请给我一杯咖啡。\nEnglish: I would like a cup of coffee, please.\n\n"
            "Chinese: The cat sleeps.\nEnglish:",
        ),
        (
            "de",
            "ja",
            "German: Das Wetter ist heute schön.\nJapanese: 今日はいい天気です。\n\n"
            "German: Wo ist der Bahnhof?\nJapanese: 駅はどこですか？\n\n"
            "German: Ich hätte gern eine Tasse Kaffee, bitte.\nJapanese: コーヒーを一杯お願いします。\n\n"
            "German: The cat sleeps.\nJapanese:",
        ),
        ("en", "sw", "Translate from English to Swahili.\n\nEnglish: The cat sleeps.\nSwahili:"),
    ],
)
def test_few_shot_prompt_for_several_pairs_without_controls(source: str, target: str, prompt: str) -> None:
    assert FewShotProfile(TemplateTokenizer(None)).build_prompt(spec("The cat sleeps.", source, target)) == prompt


def test_few_shot_with_a_glossary_or_a_context_alone() -> None:
    job = spec("Der Hund schläft.", "de", "pt-BR", glossary={"hund": "cachorro"})
    assert FewShotProfile(TemplateTokenizer(None)).build_prompt(job) == (
        "German: Das Wetter ist heute schön.\nPortuguese (Brazil): O tempo está bom hoje.\n\n"
        "German: Wo ist der Bahnhof?\nPortuguese (Brazil): Onde fica a estação de trem?\n\n"
        "German: Ich hätte gern eine Tasse Kaffee, bitte.\n"
        "Portuguese (Brazil): Eu gostaria de uma xícara de café, por favor.\n\n"
        "Terms: hund = cachorro\n"
        "German: Der Hund schläft.\nPortuguese (Brazil):"
    )
    swahili = spec("The dog sleeps.", "en", "sw", context="A farm.")
    assert FewShotProfile(TemplateTokenizer(None)).build_prompt(swahili) == (
        "Translate from English to Swahili.\n\nContext (not to translate): A farm.\nEnglish: The dog sleeps.\nSwahili:"
    )


def test_few_shot_refuses_formality() -> None:
    with pytest.raises(UnsupportedControlError, match="'few-shot' cannot apply formality"):
        FewShotProfile(TemplateTokenizer(None)).check_controls(spec("Hi", formality=Formality.FORMAL))


# General instruct models ---------------------------------------------------------------------


def test_chat_prompt_without_controls_is_unchanged() -> None:
    assert ChatProfile(TemplateTokenizer()).build_prompt(spec("Good morning.", "de", "ja")) == (
        "<|user|>Translate the following text from German to Japanese. Reply with the translation only.\n\n"
        "Good morning.<|end|><|assistant|>"
    )


def test_chat_prompt_with_every_control() -> None:
    job = spec(
        "Click Save to keep the draft.",
        "en",
        "pt-BR",
        glossary={"Save": "Salvar", "draft": "rascunho", "Print": "Imprimir"},
        context="Help text of the File menu.",
        formality=Formality.INFORMAL,
    )
    assert ChatProfile(TemplateTokenizer()).build_prompt(job) == (
        "<|user|>Translate the following text from English to Portuguese (Brazil). Reply with the translation "
        "only.\nUse an informal register.\nTranslate these terms as given: Save -> Salvar; draft -> rascunho.\n"
        "For reference only, not to translate, the text around it: Help text of the File menu.\n\n"
        "Click Save to keep the draft.<|end|><|assistant|>"
    )


def test_qwen3_switches_thinking_off_and_samples_as_its_card_says() -> None:
    profile = Qwen3Profile(TemplateTokenizer())
    assert profile.build_prompt(spec("你好", "zh", "en")) == (
        "<|user|>Translate the following text from Chinese to English. Reply with the translation only.\n\n"
        "你好<|end|><|assistant|><think></think>"
    )
    assert profile.sampling == Sampling(temperature=0.7, top_p=0.8, top_k=20)


def test_gemma3_and_llama3_sample_as_their_generation_configs_say() -> None:
    assert Gemma3Profile(TemplateTokenizer()).sampling == Sampling(temperature=1.0, top_p=0.95, top_k=64)
    assert Llama3Profile(TemplateTokenizer()).sampling == Sampling(temperature=0.6, top_p=0.9)
    assert ChatProfile(TemplateTokenizer()).sampling == Sampling()  # greedy


# Dedicated translation models ----------------------------------------------------------------


def test_translategemma_sends_one_structured_item_with_the_codes() -> None:
    profile = TranslateGemmaProfile(TemplateTokenizer(STRUCTURED_ONLY))
    job = spec("V nejhorším případě.", "cs", "de-DE")
    assert profile.messages(job) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "source_lang_code": "cs", "target_lang_code": "de-DE", "text": "V nejhorším případě."}
            ],
        }
    ]
    assert profile.build_prompt(job) == (
        "<start_of_turn>user\ncs>de-DE: V nejhorším případě.<end_of_turn>\n<start_of_turn>model\n"
    )
    # The same template refuses the plain string the generic chat profile would send.
    with pytest.raises(UnrunnableJobError, match=r"template refused this job \(TemplateError: content must be a list"):
        ChatProfile(TemplateTokenizer(STRUCTURED_ONLY)).build_prompt(job)
    with pytest.raises(UnsupportedControlError, match="'translategemma' cannot apply context"):
        profile.check_controls(spec("Hi", context="A greeting."))


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("en", "fr", "Translate the following segment into French, without additional explanation.\n\nGood night."),
        ("de", "ja", "Translate the following segment into Japanese, without additional explanation.\n\nGood night."),
        ("en", "zh", "把下面的文本翻译成中文，不要额外解释。\n\nGood night."),
        ("zh", "en", "把下面的文本翻译成英语，不要额外解释。\n\nGood night."),
        ("zh", "pt-BR", "把下面的文本翻译成葡萄牙语（巴西），不要额外解释。\n\nGood night."),
    ],
)
def test_hunyuan_uses_its_cards_templates(source: str, target: str, message: str) -> None:
    profile = HunyuanMtProfile(TemplateTokenizer())
    assert profile.user_message(spec("Good night.", source, target)) == message
    assert profile.build_prompt(spec("Good night.", source, target)) == f"<|user|>{message}<|end|><|assistant|>"


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("en", "zh", "将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释：\n\nGood night."),
        ("zh", "pt-BR", "将以下文本翻译为葡萄牙语（巴西），注意只需要输出翻译后的结果，不要额外解释：\n\nGood night."),
        ("de", "ja", "Translate the following segment into Japanese, without additional explanation.\n\nGood night."),
    ],
)
def test_hy_mt15_words_the_chinese_template_as_its_own_card(source: str, target: str, message: str) -> None:
    profile = HyMt15Profile(TemplateTokenizer())
    assert profile.user_message(spec("Good night.", source, target)) == message
    assert profile.sampling == HunyuanMtProfile.sampling and profile.supports == HunyuanMtProfile.supports
    assert profile.identity == "hy-mt1.5:1"


def test_hunyuan_terminology_and_context_templates() -> None:
    profile = HunyuanMtProfile(TemplateTokenizer())
    terms = spec("The cat sleeps.", "en", "de", glossary={"cat": "Katze", "dog": "Hund"})
    assert profile.user_message(terms) == (
        "参考下面的翻译：\ncat 翻译成 Katze\n\n"
        "将以下文本翻译为德语，注意只需要输出翻译后的结果，不要额外解释：\nThe cat sleeps."
    )
    both = spec("It sleeps.", "en", "de", glossary={"sleeps": "schläft"}, context="The cat is tired.")
    assert profile.user_message(both) == (
        "参考下面的翻译：\nsleeps 翻译成 schläft\n\nThe cat is tired.\n"
        "参考上面的信息，把下面的文本翻译成德语，注意不需要翻译上文，也不要额外解释：\nIt sleeps."
    )
    assert profile.sampling == Sampling(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05)
    with pytest.raises(UnsupportedControlError, match="'hunyuan-mt' cannot apply formality"):
        profile.check_controls(spec("Hi", formality=Formality.FORMAL))


@pytest.mark.parametrize(
    ("source", "target", "prompt"),
    [
        ("en", "zh", "Translate the following English sentence into Chinese:\nMay the force be with you <zh>"),
        ("fr", "de", "Translate the following French sentence into German:\nMay the force be with you <de>"),
        ("en", "pt-BR", "Translate the following English sentence into Portuguese:\nMay the force be with you <pt>"),
        ("zh", "en", "Translate the following Chinese sentence into English:\nMay the force be with you <en>"),
        ("de", "ja", "Translate the following German sentence into Japanese:\nMay the force be with you <ja>"),
    ],
)
def test_seed_x_completion_prompt(source: str, target: str, prompt: str) -> None:
    profile = SeedXProfile(TemplateTokenizer(None))
    assert profile.build_prompt(spec("May the force be with you", source, target)) == prompt
    assert profile.prompt_token_ids(spec("May the force be with you", source, target))[0] == 2  # BOS first
    with pytest.raises(UnsupportedControlError, match="'seed-x' cannot apply glossary"):
        profile.check_controls(spec("The cat.", glossary={"cat": "chat"}))
    profile.check_controls(spec("The dog.", glossary={"cat": "chat"}))  # no term in the text: nothing asked


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("zh", "en", "Translate the following Chinese source text to English:\nChinese: 晚安。\nEnglish: "),
        ("de", "ja", "Translate the following German source text to Japanese:\nGerman: 晚安。\nJapanese: "),
        (
            "en",
            "pt-BR",
            "Translate the following English source text to Portuguese (Brazil):\nEnglish: 晚安。\n"
            "Portuguese (Brazil): ",
        ),
    ],
)
def test_tower_plus_for_several_pairs(source: str, target: str, message: str) -> None:
    profile = TowerPlusProfile(TemplateTokenizer())
    assert profile.build_prompt(spec("晚安。", source, target)) == f"<|user|>{message}<|end|><|assistant|>"
    assert profile.sampling == Sampling() and profile.supports == frozenset()


def test_tower_plus_card_prompt() -> None:
    profile = TowerPlusProfile(TemplateTokenizer())
    assert profile.user_message(spec("Hello world!", "en", "pt-PT")) == (
        "Translate the following English source text to Portuguese (Portugal):\n"
        "English: Hello world!\nPortuguese (Portugal): "
    )
    assert profile.build_prompt(spec("Hallo", "de", "en")) == (
        "<|user|>Translate the following German source text to English:\nGerman: Hallo\nEnglish: <|end|><|assistant|>"
    )


def test_identity_takes_every_control_and_ignores_it() -> None:
    profile = IdentityProfile(TemplateTokenizer(None))
    job = spec("Hi", glossary={"Hi": "Salut"}, context="c", formality=Formality.FORMAL)
    profile.check_controls(job)
    assert profile.build_prompt(job) == "Hi"


def test_every_profile_has_a_memory_identity() -> None:
    identities = {cls(TemplateTokenizer()).identity for cls in PROFILES.values()}
    assert len(identities) == len(PROFILES) and all(":" in identity for identity in identities)


@pytest.mark.parametrize(
    ("source", "target", "rendered"),
    [
        ("en", "fr", "<start_of_turn>user\nen>fr: Good night.<end_of_turn>\n<start_of_turn>model\n"),
        ("zh", "en", "<start_of_turn>user\nzh>en: Good night.<end_of_turn>\n<start_of_turn>model\n"),
        ("pt-BR", "ja", "<start_of_turn>user\npt-BR>ja: Good night.<end_of_turn>\n<start_of_turn>model\n"),
    ],
)
def test_translategemma_for_several_pairs(source: str, target: str, rendered: str) -> None:
    assert TranslateGemmaProfile(TemplateTokenizer(STRUCTURED_ONLY)).build_prompt(
        spec("Good night.", source, target)
    ) == (rendered)


@pytest.mark.parametrize("profile", [Gemma3Profile, Llama3Profile, Qwen3Profile])
@pytest.mark.parametrize(
    ("source", "target", "names"),
    [
        ("en", "fr", "English to French"),
        ("zh", "en", "Chinese to English"),
        ("de", "pt-BR", "German to Portuguese (Brazil)"),
    ],
)
def test_instruct_profiles_for_several_pairs(profile: type[ChatProfile], source: str, target: str, names: str) -> None:
    prompt = profile(TemplateTokenizer()).build_prompt(spec("Good night.", source, target, formality=Formality.FORMAL))
    thinking_off = "<think></think>" if profile is Qwen3Profile else ""
    assert prompt == (
        f"<|user|>Translate the following text from {names}. Reply with the translation only.\n"
        f"Use a formal register.\n\nGood night.<|end|><|assistant|>{thinking_off}"
    )


# A job its template cannot render -------------------------------------------------------------

KNOWN_CODES = (
    '{% set names = {"en": "English", "fr": "French"} %}{% for m in messages %}{% set c = m.content[0] %}'
    "{{ names[c.source_lang_code] + ' to ' + names[c.target_lang_code] }}: {{ c.text }}{% endfor %}"
)


def test_a_language_the_chat_template_does_not_know_fails_the_job_at_once() -> None:
    # TranslateGemma's real template looks the codes up in a fixed table and raises for others.
    profile = TranslateGemmaProfile(TemplateTokenizer(KNOWN_CODES))
    assert profile.build_prompt(spec("Hi", "en", "fr")) == "English to French: Hi"
    with pytest.raises(UnrunnableJobError, match=r"refused this job \(UndefinedError: .*'tlh'.*dragoman model check"):
        profile.build_prompt(spec("Hi", "en", "tlh"))


def test_a_template_profile_that_fails_on_one_job_fails_that_job_at_once() -> None:
    template = '{{ {"fr": "French", "de": "German"}[target_lang] }}: {{ text }}'
    profile = TemplateProfile(TemplateTokenizer(None), {"template": template}, "dragoman.json")  # fine for en->fr
    with pytest.raises(UnrunnableJobError, match=r"refused this job \(UndefinedError: .*'ja'"):
        profile.prompt_token_ids(spec("Hi", "en", "ja"))
