"""Which profile serves a model: the one named, a profile file, the model folder's ``dragoman.json``, or a guess."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from contract.errors import ConfigurationError
from worker.engine import Tokenizer
from worker.profiles.base import PromptProfile
from worker.profiles.few_shot import FewShotProfile
from worker.profiles.identity import IdentityProfile
from worker.profiles.instruct import ChatProfile, Gemma3Profile, Llama3Profile, Qwen3Profile
from worker.profiles.template import TemplateProfile, load_definition
from worker.profiles.translation_models import (
    HunyuanMtProfile,
    HyMt15Profile,
    SeedXProfile,
    TowerPlusProfile,
    TranslateGemmaProfile,
)

PROFILE_FILE = "dragoman.json"

PROFILES: dict[str, type[PromptProfile]] = {
    profile.name: profile
    for profile in (
        FewShotProfile,
        ChatProfile,
        Qwen3Profile,
        Gemma3Profile,
        Llama3Profile,
        TranslateGemmaProfile,
        HunyuanMtProfile,
        HyMt15Profile,
        SeedXProfile,
        TowerPlusProfile,
        IdentityProfile,
    )
}


class Choice(NamedTuple):
    """The profile chosen and why (``dragoman model check`` prints the reason)."""

    profile: PromptProfile
    reason: str


def choose_profile(
    name: str | None, model_path: Path | None, tokenizer: Tokenizer, *, profile_file: Path | None = None
) -> PromptProfile:
    """The profile to use (see :func:`choose`)."""
    return choose(name, model_path, tokenizer, profile_file=profile_file).profile


def choose(
    name: str | None, model_path: Path | None, tokenizer: Tokenizer, *, profile_file: Path | None = None
) -> Choice:
    """The profile named, else the one ``profile_file`` defines, else the model folder's ``dragoman.json``
    (a name or a template definition), else ``translategemma`` when the chat template takes language
    codes, else ``chat`` when the tokenizer has a chat template, else ``few-shot``."""
    if name is not None and profile_file is not None:
        raise ConfigurationError("give either --profile or --profile-file, not both")
    if name is not None:
        return Choice(_named(name, tokenizer), f"named: --profile {name}")
    if profile_file is not None:
        return Choice(_from_file(profile_file, tokenizer), f"defined in {profile_file}")
    if model_path is not None and (model_path / PROFILE_FILE).is_file():
        path = model_path / PROFILE_FILE
        value = load_definition(path).get("profile")
        if isinstance(value, str):
            return Choice(_named(value, tokenizer), f'named in {path} ("profile": "{value}")')
        if isinstance(value, dict):
            return Choice(TemplateProfile(tokenizer, value, str(path)), f"defined in {path}")
        if value is not None:
            raise ConfigurationError(f"{path}: 'profile' must be a profile name or a template definition (an object)")
    chat_template = getattr(tokenizer, "chat_template", None)
    if chat_template and "source_lang_code" in str(chat_template):
        # The generic chat message would be refused by this template on every job.
        return Choice(
            TranslateGemmaProfile(tokenizer),
            "the chat template takes source_lang_code and target_lang_code (TranslateGemma)",
        )
    if chat_template:
        return Choice(ChatProfile(tokenizer), "the tokenizer has a chat template (an instruct model)")
    return Choice(FewShotProfile(tokenizer), "the tokenizer has no chat template (a base model)")


def _named(name: str, tokenizer: Tokenizer) -> PromptProfile:
    try:
        profile = PROFILES[name]
    except KeyError:
        raise ConfigurationError(
            f"unknown prompt profile {name!r}; choose one of {', '.join(sorted(PROFILES))}, or define one in a "
            f"{PROFILE_FILE} (docs/guides/bring-your-own-model.md)"
        ) from None
    return profile(tokenizer)


def _from_file(path: Path, tokenizer: Tokenizer) -> PromptProfile:
    data = load_definition(path)
    definition = data.get("profile", data)  # the file may be a dragoman.json or the definition alone
    if not isinstance(definition, dict):
        raise ConfigurationError(f"{path}: a profile file holds a template definition (an object)")
    return TemplateProfile(tokenizer, definition, str(path))
