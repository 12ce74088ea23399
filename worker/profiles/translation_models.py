"""Profiles for the dedicated open translation models, each with the prompt its model card publishes.

A control a card shows no way to give is not supported: a job asking for it fails at once with
:class:`~contract.errors.UnsupportedControlError` rather than being sent in a form the model was
never trained on.
"""

from __future__ import annotations

import langcodes

from contract.controls import Control
from contract.schemas import JobSpec
from worker.profiles.base import PromptProfile, Sampling, chat_prompt, glossary_in_text, languages
from worker.profiles.few_shot import base_language


class TranslateGemmaProfile(PromptProfile):
    """Google's TranslateGemma (huggingface.co/google/translategemma-4b-it).

    Its chat template takes the user content as a list holding one structured item
    (``type: text`` with ``source_lang_code``, ``target_lang_code`` and ``text``) and writes the
    translator instruction itself; a plain-string message is rejected. The card decodes greedily.
    """

    name = "translategemma"

    def messages(self, spec: JobSpec) -> list[dict[str, object]]:
        """The one structured user message the template expects."""
        item = {
            "type": "text",
            "source_lang_code": spec.source_lang,
            "target_lang_code": spec.target_lang,
            "text": spec.text,
        }
        return [{"role": "user", "content": [item]}]

    def build_prompt(self, spec: JobSpec) -> str:
        """The model's own chat template applied to the structured message."""
        return chat_prompt(self.tokenizer, self.messages(spec))

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The templated prompt's ids (the template carries the BOS token)."""
        return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)


# Hunyuan-MT-7B's card (github.com/Tencent-Hunyuan/Hunyuan-MT, README "Prompts"), in its own words.
HUNYUAN_ZH = "把下面的文本翻译成{target}，不要额外解释。\n\n{text}"
HUNYUAN_XX = "Translate the following segment into {target}, without additional explanation.\n\n{text}"
# HY-MT1.5's card (github.com/Tencent-Hunyuan/HY-MT, README "Prompts"): its Chinese template, and the
# terminology and contextual templates it publishes for the family.
HY_MT15_ZH = "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n\n{text}"
HUNYUAN_GLOSSARY = "参考下面的翻译：\n{terms}\n\n"
HUNYUAN_TERMS = HUNYUAN_GLOSSARY + "将以下文本翻译为{target}，注意只需要输出翻译后的结果，不要额外解释：\n{text}"
HUNYUAN_TERM = "{source} 翻译成 {target}"
HUNYUAN_CONTEXT = "{context}\n参考上面的信息，把下面的文本翻译成{target}，注意不需要翻译上文，也不要额外解释：\n{text}"


class HunyuanMtProfile(PromptProfile):
    """Tencent's Hunyuan-MT-7B (huggingface.co/tencent/Hunyuan-MT-7B; github.com/Tencent-Hunyuan/Hunyuan-MT).

    The card's templates, sent as the user message through the chat template (the model has no
    default system prompt): ``HUNYUAN_ZH`` ("translate the text below into <target>, no extra
    explanation") when Chinese is on either side, the target named in Chinese (from ``langcodes``),
    else ``HUNYUAN_XX``, "Translate the following segment into <target_language>, without additional
    explanation.". A glossary goes in as the family's terminology template, context as its
    contextual template (a glossary then comes first, as terminology lines); those two are
    published on the HY-MT1.5 card (see :class:`HyMt15Profile`), whose models were trained for them.
    Recommended sampling: top_k 20, top_p 0.6, repetition_penalty 1.05, temperature 0.7.
    """

    name = "hunyuan-mt"
    version = "2"  # 2: Hunyuan-MT-7B's own Chinese template (1 used HY-MT1.5's)
    supports = frozenset({Control.GLOSSARY, Control.CONTEXT})
    sampling = Sampling(temperature=0.7, top_p=0.6, top_k=20, repetition_penalty=1.05)
    chinese_template = HUNYUAN_ZH

    def user_message(self, spec: JobSpec) -> str:
        """The card's template for this pair and these controls, filled in."""
        target_zh = str(langcodes.Language.get(spec.target_lang).display_name("zh"))
        terms = "\n".join(HUNYUAN_TERM.format(source=s, target=t) for s, t in glossary_in_text(spec))
        if spec.context is not None:
            context = (HUNYUAN_GLOSSARY.format(terms=terms) if terms else "") + spec.context
            return HUNYUAN_CONTEXT.format(context=context, target=target_zh, text=spec.text)
        if terms:
            return HUNYUAN_TERMS.format(terms=terms, target=target_zh, text=spec.text)
        if "zh" in (base_language(spec.source_lang), base_language(spec.target_lang)):
            return self.chinese_template.format(target=target_zh, text=spec.text)
        return HUNYUAN_XX.format(target=languages(spec)[1], text=spec.text)

    def build_prompt(self, spec: JobSpec) -> str:
        """The user message through the model's chat template."""
        return chat_prompt(self.tokenizer, [{"role": "user", "content": self.user_message(spec)}])

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The templated prompt's ids (the template carries the BOS token)."""
        return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)


class HyMt15Profile(HunyuanMtProfile):
    """Tencent's HY-MT1.5-1.8B and HY-MT1.5-7B (huggingface.co/tencent/HY-MT1.5-7B; github.com/Tencent-Hunyuan/HY-MT).

    The same templates, sampling and controls as ``hunyuan-mt`` except the Chinese one, which the
    HY-MT1.5 card words differently (``HY_MT15_ZH``: "... note: output only the translation, no
    extra explanation:").
    """

    name = "hy-mt1.5"
    version = "1"
    chinese_template = HY_MT15_ZH


class SeedXProfile(PromptProfile):
    """ByteDance's Seed-X-PPO-7B / Seed-X-Instruct-7B (huggingface.co/ByteDance-Seed/Seed-X-PPO-7B).

    A plain completion prompt, no chat template: "Translate the following English sentence into
    Chinese:\\nMay the force be with you <zh>", the target's language code as a tag after the
    text; the card decodes greedily (or with beam search, which the worker does not use).
    """

    name = "seed-x"

    def build_prompt(self, spec: JobSpec) -> str:
        """``Translate the following <Source> sentence into <Target>:\\n<text> <code>``."""
        source = str(langcodes.Language.get(spec.source_lang).language_name("en"))
        target = str(langcodes.Language.get(spec.target_lang).language_name("en"))
        tag = base_language(spec.target_lang)
        return f"Translate the following {source} sentence into {target}:\n{spec.text} <{tag}>"


class TowerPlusProfile(PromptProfile):
    """Unbabel's Tower-Plus models (huggingface.co/Unbabel/Tower-Plus-9B), greedy.

    The card's user message, through the chat template: "Translate the following English source
    text to Portuguese (Portugal):\\nEnglish: Hello world!\\nPortuguese (Portugal): ".
    """

    name = "tower-plus"

    def user_message(self, spec: JobSpec) -> str:
        """The card's instruction, filled in."""
        source, target = languages(spec)
        return f"Translate the following {source} source text to {target}:\n{source}: {spec.text}\n{target}: "

    def build_prompt(self, spec: JobSpec) -> str:
        """The user message through the model's chat template."""
        return chat_prompt(self.tokenizer, [{"role": "user", "content": self.user_message(spec)}])

    def prompt_token_ids(self, spec: JobSpec) -> list[int]:
        """The templated prompt's ids (the template carries the BOS token)."""
        return self.tokenizer.encode(self.build_prompt(spec), add_special_tokens=False)
