"""``dragoman model check``: the profile a model folder gets, and the exact prompt of a sample job.

The model folders here hold only a tokenizer built on the spot (no download, no weights): what
``model check`` loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, main

CHAT_TEMPLATE = "{% for m in messages %}<user>{{ m.content }}</user>{% endfor %}<assistant>"


def _model_folder(path: Path, *, chat_template: str | None = None, profile: object = None) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", "<s>", "\n", "The", "cat", "sleeps", "."]
    backend = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, unk_token="[UNK]", bos_token="<s>"
    )
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    path.mkdir()
    tokenizer.save_pretrained(str(path))
    if profile is not None:
        (path / "dragoman.json").write_text(json.dumps({"profile": profile}))
    return path


def test_a_base_model_gets_few_shot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _model_folder(tmp_path / "base")
    assert main(["model", "check", str(folder), "--glossary", '{"cat": "chat"}']) == EXIT_OK
    out = capsys.readouterr().out
    assert "profile     few-shot (version 1): the tokenizer has no chat template (a base model)" in out
    assert "controls    context, glossary" in out and "sampling    greedy" in out
    assert "stops at    1 line-break tokens" in out and "one sentence at a time" in out
    assert "Terms: cat = chat\nEnglish: The cat sleeps on the sofa.\nFrench:\n" in out


def test_an_instruct_model_gets_chat_and_a_named_profile_wins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _model_folder(tmp_path / "instruct", chat_template=CHAT_TEMPLATE)
    assert main(["model", "check", str(folder), "--to", "de", "--formality", "formal"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "profile     chat (version 1): the tokenizer has a chat template (an instruct model)" in out
    assert (
        "<user>Translate the following text from English to German. Reply with the translation only.\n"
        "Use a formal register.\n\nThe cat sleeps on the sofa.</user><assistant>"
    ) in out
    assert main(["model", "check", str(folder), "--profile", "hunyuan-mt", "--to", "ja"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "profile     hunyuan-mt (version 2): named: --profile hunyuan-mt" in out
    assert "temperature 0.7, top_p 0.6, top_k 20, repetition_penalty 1.05" in out
    assert "Translate the following segment into Japanese, without additional explanation." in out
    # The spelled-out option names work too; a glossary gets the card's terminology template.
    argv = ["model", "check", str(folder), "--profile", "hunyuan-mt", "--source-lang", "zh", "--target-lang", "en"]
    assert main([*argv, "--text", "你好。", "--glossary-json", '{"你好": "Hello"}']) == EXIT_OK
    out = capsys.readouterr().out
    assert 'sample job  zh -> en: "你好。"' in out
    assert (
        "<user>参考下面的翻译：\n你好 翻译成 Hello\n\n"
        "将以下文本翻译为英语，注意只需要输出翻译后的结果，不要额外解释：\n你好。</user>" in out
    )


TRANSLATEGEMMA_STYLE = (
    "{% for m in messages %}{% set c = m.content[0] %}"
    "<user>{{ c.source_lang_code }}>{{ c.target_lang_code }}: {{ c.text }}</user>{% endfor %}<model>"
)


def test_a_chat_template_that_takes_language_codes_gets_translategemma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _model_folder(tmp_path / "translategemma", chat_template=TRANSLATEGEMMA_STYLE)
    assert main(["model", "check", str(folder), "--target-lang", "pt-BR"]) == EXIT_OK
    out = capsys.readouterr().out
    assert (
        "profile     translategemma (version 1): the chat template takes source_lang_code and target_lang_code "
        "(TranslateGemma)"
    ) in out
    assert "controls    none" in out and "sampling    greedy" in out
    assert "<user>en>pt-BR: The cat sleeps on the sofa.</user><model>\n" in out


def test_a_control_the_profile_cannot_apply_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _model_folder(tmp_path / "seedx")
    argv = ["model", "check", str(folder), "--profile", "seed-x", "--context", "A story."]
    assert main(argv) == EXIT_BAD_INPUT
    assert "refused: prompt profile 'seed-x' cannot apply context" in capsys.readouterr().out


TEMPLATE_PROFILE = {
    "name": "house-mt",
    "version": "3",
    "template": (
        "{% for term in glossary %}{{ term.source }} => {{ term.target }}\n{% endfor %}"
        "{% if context %}Context: {{ context }}\n{% endif %}"
        "{{ source_language }} ({{ source_lang }}) to {{ target_language }} ({{ target_lang }})"
        "{% if formality %}, {{ formality }}{% endif %}: {{ text }}\n=>"
    ),
    "stop": ["\n"],
    "sampling": {"temperature": 0.2, "top_p": 0.9},
    "supports": ["glossary", "context", "formality"],
}


def test_a_template_profile_from_dragoman_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _model_folder(tmp_path / "house", profile=TEMPLATE_PROFILE)
    argv = ["model", "check", str(folder), "--to", "pt-BR", "--glossary", '{"sofa": "sofá"}', "--formality", "formal"]
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert "profile     house-mt (version 3+" in out and f"defined in {folder / 'dragoman.json'}" in out
    assert "sampling    temperature 0.2, top_p 0.9, top_k 0, repetition_penalty 1.0" in out
    assert 'stops at    1 line-break tokens, "\\n"' in out
    assert "sofa => sofá\nEnglish (en) to Portuguese (Brazil) (pt-BR), formal: The cat sleeps on the sofa.\n=>\n" in out


def test_a_profile_file_and_a_name_in_dragoman_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _model_folder(tmp_path / "named", chat_template=CHAT_TEMPLATE, profile="qwen3")
    assert main(["model", "check", str(folder)]) == EXIT_OK
    assert "(version 1): named in" in capsys.readouterr().out
    profile_file = tmp_path / "profile.json"
    profile_file.write_text(json.dumps({**TEMPLATE_PROFILE, "chat": True}))
    assert main(["model", "check", str(folder), "--profile-file", str(profile_file)]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"defined in {profile_file}" in out and "<user>English (en) to French (fr): The cat" in out


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ({**TEMPLATE_PROFILE, "template": "{{ text "}, "not valid Jinja2"),
        ({**TEMPLATE_PROFILE, "template": "{{ txet }}"}, "fails on a sample job: UndefinedError"),
        ({**TEMPLATE_PROFILE, "colour": "red"}, "unknown key(s) ['colour']"),
        ({**TEMPLATE_PROFILE, "supports": ["tone"]}, "unknown control(s) ['tone']"),
        ({**TEMPLATE_PROFILE, "sampling": {"temperature": -1}}, "out of range"),
        ({**TEMPLATE_PROFILE, "chat": True}, "has no chat template"),
        ({**TEMPLATE_PROFILE, "template": "{{ ''.__class__.__mro__ }}"}, "fails on a sample job"),
        ("no-such-profile", "unknown prompt profile 'no-such-profile'"),
        (["a"], "must be a profile name or a template definition"),
    ],
)
def test_a_broken_profile_definition_is_a_clear_error(
    profile: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _model_folder(tmp_path / "broken", profile=profile)
    assert main(["model", "check", str(folder)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert says in err, err


def test_a_folder_without_a_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["model", "check", str(tmp_path / "empty")]) == EXIT_ERROR
    assert "cannot load a tokenizer from" in capsys.readouterr().err


def test_the_readme_template_example_loads_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    guide = Path(__file__).parents[2] / "docs" / "guides" / "bring-your-own-model.md"
    match = re.search(r"```json\n(.*?)\n```", guide.read_text(encoding="utf-8"), re.DOTALL)
    assert match, "the bring-your-own-model guide lost its dragoman.json example"
    definition = json.loads(match.group(1))["profile"]
    folder = _model_folder(tmp_path / "readme", chat_template=CHAT_TEMPLATE, profile=definition)
    argv = [
        "model",
        "check",
        str(folder),
        "--glossary",
        '{"cat": "chat"}',
        "--context",
        "Pets.",
        "--formality",
        "formal",
    ]
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert "<user>cat => chat\nContext: Pets.\nTranslate from English to French (formal register):\nThe cat" in out


def test_the_worker_refuses_a_bad_profile_before_starting_an_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--profile", "no-such-profile"]) == EXIT_ERROR
    assert "unknown prompt profile 'no-such-profile'" in capsys.readouterr().err
    assert main(["worker", "--profile-file", str(tmp_path / "missing.json")]) == EXIT_ERROR
    assert "cannot read the prompt profile file" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{nope")
    assert main(["worker", "--profile-file", str(tmp_path / "bad.json")]) == EXIT_ERROR
    assert "is not valid JSON" in capsys.readouterr().err
