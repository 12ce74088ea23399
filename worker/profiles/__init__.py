"""Prompt profiles: how a job becomes a prompt, and how the model's output becomes a translation.

One profile serves each model: ``few-shot`` for base models (the default Gemma 3 270M), ``chat``
for any instruct model, ``qwen3``/``gemma3``/``llama3`` with their cards' sampling, the dedicated
translation models' own prompts (``translategemma``, ``hunyuan-mt``, ``hy-mt1.5``, ``seed-x``,
``tower-plus``), a Jinja2 template from a ``dragoman.json`` (``template``), and ``identity`` for the
test engine.

- ``base``: :class:`PromptProfile`, :class:`Sampling`, the controls check, shared prompt pieces.
- ``few_shot``, ``instruct``, ``translation_models``, ``identity``: the named profiles.
- ``template``: :class:`TemplateProfile`, a profile defined by data.
- ``chooser``: :data:`PROFILES`, :func:`choose_profile` (and :func:`choose`, with the reason).
"""

from worker.profiles.base import GREEDY, PromptProfile, Sampling, newline_token_ids
from worker.profiles.chooser import PROFILE_FILE, PROFILES, Choice, choose, choose_profile
from worker.profiles.few_shot import FEW_SHOT_EXAMPLES, FewShotProfile
from worker.profiles.identity import IdentityProfile
from worker.profiles.instruct import ChatProfile, Gemma3Profile, Llama3Profile, Qwen3Profile
from worker.profiles.template import TemplateProfile
from worker.profiles.translation_models import (
    HunyuanMtProfile,
    HyMt15Profile,
    SeedXProfile,
    TowerPlusProfile,
    TranslateGemmaProfile,
)

__all__ = [
    "FEW_SHOT_EXAMPLES",
    "GREEDY",
    "PROFILES",
    "PROFILE_FILE",
    "ChatProfile",
    "Choice",
    "FewShotProfile",
    "Gemma3Profile",
    "HunyuanMtProfile",
    "HyMt15Profile",
    "IdentityProfile",
    "Llama3Profile",
    "PromptProfile",
    "Qwen3Profile",
    "Sampling",
    "SeedXProfile",
    "TemplateProfile",
    "TowerPlusProfile",
    "TranslateGemmaProfile",
    "choose",
    "choose_profile",
    "newline_token_ids",
]
