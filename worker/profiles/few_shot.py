"""The few-shot profile, for base models (the default Gemma 3 270M): examples, then the source line."""

from __future__ import annotations

import re
from collections.abc import Sequence

from contract.controls import Control
from contract.schemas import JobSpec
from worker.profiles.base import (
    TAGS_INSTRUCTION,
    PromptProfile,
    glossary_in_text,
    keeps_tags,
    languages,
    newline_token_ids,
)

# Three short sentences in the languages the few-shot profile has examples for. For a pair
# where either side is missing, the profile falls back to an instruction without examples.
FEW_SHOT_EXAMPLES: dict[str, tuple[str, str, str]] = {
    "en": ("The weather is nice today.", "Where is the train station?", "I would like a cup of coffee, please."),
    "fr": ("Il fait beau aujourd'hui.", "Où est la gare ?", "Je voudrais une tasse de café, s'il vous plaît."),
    "de": ("Das Wetter ist heute schön.", "Wo ist der Bahnhof?", "Ich hätte gern eine Tasse Kaffee, bitte."),
    "es": ("Hoy hace buen tiempo.", "¿Dónde está la estación de tren?", "Quisiera una taza de café, por favor."),
    "it": ("Oggi il tempo è bello.", "Dov'è la stazione ferroviaria?", "Vorrei una tazza di caffè, per favore."),
    "pt": ("O tempo está bom hoje.", "Onde fica a estação de trem?", "Eu gostaria de uma xícara de café, por favor."),
    "nl": ("Het weer is mooi vandaag.", "Waar is het treinstation?", "Ik wil graag een kopje koffie, alstublieft."),
    "ja": ("今日はいい天気です。", "駅はどこですか？", "コーヒーを一杯お願いします。"),
    "zh": ("今天天气很好。", "火车站在哪里？", "请给我一杯咖啡。"),
    "ko": ("오늘은 날씨가 좋네요.", "기차역이 어디에 있어요?", "커피 한 잔 주세요."),
}


# Two more pairs, with placeholder tags (a paired one and a unit one), for a document segment whose
# inline markup the model must keep: a base model copies the shape of its examples.
TAGGED_EXAMPLES: dict[str, tuple[str, str]] = {
    "en": ("Press <x1>the button</x1> to open the <x2>menu</x2>.", "Type <x1/> and then save the <x2>file</x2>."),
    "fr": (
        "Appuyez sur <x1>le bouton</x1> pour ouvrir le <x2>menu</x2>.",
        "Tapez <x1/> puis enregistrez le <x2>fichier</x2>.",
    ),
    "de": (
        "Drücken Sie <x1>die Taste</x1>, um das <x2>Menü</x2> zu öffnen.",
        "Geben Sie <x1/> ein und speichern Sie dann die <x2>Datei</x2>.",
    ),
    "es": ("Pulse <x1>el botón</x1> para abrir el <x2>menú</x2>.", "Escriba <x1/> y luego guarde el <x2>archivo</x2>."),
    "it": ("Premi <x1>il pulsante</x1> per aprire il <x2>menu</x2>.", "Digita <x1/> e poi salva il <x2>file</x2>."),
    "pt": (
        "Pressione <x1>o botão</x1> para abrir o <x2>menu</x2>.",
        "Digite <x1/> e depois salve o <x2>arquivo</x2>.",
    ),
    "nl": (
        "Druk op <x1>de knop</x1> om het <x2>menu</x2> te openen.",
        "Typ <x1/> en sla daarna het <x2>bestand</x2> op.",
    ),
    "ja": (
        "<x1>ボタン</x1>を押して<x2>メニュー</x2>を開きます。",
        "<x1/>と入力してから<x2>ファイル</x2>を保存します。",
    ),
    "zh": ("按<x1>按钮</x1>打开<x2>菜单</x2>。", "输入<x1/>，然后保存<x2>文件</x2>。"),
    "ko": ("<x1>버튼</x1>을 눌러 <x2>메뉴</x2>를 여세요.", "<x1/>을 입력한 다음 <x2>파일</x2>을 저장하세요."),
}


class FewShotProfile(PromptProfile):
    """For base models: three example pairs, then the source line; stop at the end of the line.

    The model answers one line and has seen one-sentence examples, so the translator sends it
    one sentence at a time (``piece_unit``) and puts the translations back between the source's
    own spaces and line breaks. (Whole 150-word lines made Gemma 3 270M run on past twice its
    budget; one sentence at a time it stops at the end of the line.) A glossary and context are
    two short lines before the source line; a base model has no notion of a register, so
    formality is refused.
    """

    name = "few-shot"
    supports = frozenset({Control.GLOSSARY, Control.CONTEXT})
    piece_unit = "sentence"

    def build_prompt(self, spec: JobSpec) -> str:
        """``Source: example / Target: example`` three times, the controls, then ``Source: text / Target:``."""
        source, target = languages(spec)
        text = " ".join(spec.text.split())  # one line (the translator sends lines one by one)
        src_examples = FEW_SHOT_EXAMPLES.get(base_language(spec.source_lang))
        tgt_examples = FEW_SHOT_EXAMPLES.get(base_language(spec.target_lang))
        tagged = keeps_tags(spec)
        if src_examples is None or tgt_examples is None or src_examples is tgt_examples:
            header = f"Translate from {source} to {target}.\n" + (f"{TAGS_INSTRUCTION}\n" if tagged else "") + "\n"
        else:
            pairs = list(zip(src_examples, tgt_examples, strict=True))
            if tagged:
                source_tagged = TAGGED_EXAMPLES[base_language(spec.source_lang)]
                target_tagged = TAGGED_EXAMPLES[base_language(spec.target_lang)]
                pairs += list(zip(source_tagged, target_tagged, strict=True))
            header = "".join(f"{source}: {src}\n{target}: {tgt}\n\n" for src, tgt in pairs)
        controls = ""
        if spec.context is not None:
            controls += f"Context (not to translate): {' '.join(spec.context.split())}\n"
        terms = glossary_in_text(spec)
        if terms:
            controls += "Terms: " + "; ".join(f"{src} = {tgt}" for src, tgt in terms) + "\n"
        return f"{header}{controls}{source}: {text}\n{target}:"

    def stop_token_ids(self) -> Sequence[int]:
        """Every vocabulary entry that contains a line break."""
        return newline_token_ids(self.tokenizer)

    def postprocess(self, generated: str) -> str:
        """The first line of the output, trimmed."""
        return generated.split("\n", 1)[0].strip()


def base_language(code: str) -> str:
    """The language subtag of a code ("pt-BR" -> "pt")."""
    return re.split(r"[-_]", code, maxsplit=1)[0].lower()
