"""An instruct model's chat template: the text a message becomes before the model reads it.

The template is the Jinja text a checkpoint keeps in `tokenizer_config.json` (`chat_template`),
rendered as transformers' `apply_chat_template` renders it — in Jinja's immutable sandbox, so a
template can format messages but reach nothing else. SmolLM2-Instruct's, for one user message:

    <|im_start|>system\\nYou are a helpful AI assistant named SmolLM, …<|im_end|>\\n
    <|im_start|>user\\n{message}<|im_end|>\\n<|im_start|>assistant\\n
"""

from __future__ import annotations

from typing import Any

from attnviz.errors import SpecError
from attnviz.pretrained.files import TOKENIZER_CONFIG, CheckpointError, read_json


def template_of(checkpoint: Any) -> str | None:
    """The checkpoint's chat template, or None (a base model, or no `tokenizer_config.json`)."""
    if not (checkpoint.path / TOKENIZER_CONFIG).is_file():
        return None
    settings = read_json(checkpoint.path, TOKENIZER_CONFIG)
    template = settings.get("chat_template") if isinstance(settings, dict) else None
    if template is not None and not isinstance(template, str):  # a list of named templates: not read
        raise CheckpointError(TOKENIZER_CONFIG, "chat_template", "not one text", "a Jinja template text")
    return template


def render(template: str, messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
    """`messages` (`{"role": …, "content": …}`) through `template`, ending where the assistant answers."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(
            messages=messages, add_generation_prompt=add_generation_prompt
        )
    except TemplateError as error:
        raise CheckpointError(
            TOKENIZER_CONFIG,
            "chat_template",
            f"a template that fails ({type(error).__name__})",
            "a Jinja template",
        ) from None


def prompt(checkpoint: Any, message: str) -> str:
    """`message` as the user's turn of a chat, ready for `Checkpoint.generate` / `run`.

    Raises:
        SpecError: (field "chat") the checkpoint has no chat template.
    """
    template = template_of(checkpoint)
    if template is None:
        raise SpecError("chat", checkpoint.name, "a checkpoint with a chat template (an instruct model)")
    return render(template, [{"role": "user", "content": message}])
