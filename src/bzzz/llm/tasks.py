"""The seed's four task types: their task data shapes and the prompts built from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bzzz.errors import InvalidParameters
from bzzz.llm.prompts import system_prompt
from bzzz.llm.roles import RoleTemplate
from bzzz.llm.types import TASK_TYPES, ChatMessage


class _Data(BaseModel):
    # Task data may carry fields for other consumers (project, stream): keep them, ignore them.
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    project: str | None = None


class ChatMessageIn(BaseModel):
    """A message of a chat_completion task."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=200_000)


class ChatCompletionData(_Data):
    """chat_completion: messages and optional model, temperature, maxTokens."""

    messages: list[ChatMessageIn] = Field(min_length=1, max_length=500)
    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, alias="maxTokens", gt=0, le=200_000)
    stream: bool = False


class CodeReviewData(_Data):
    """code_review: code, optional language (the model tells it from the code) and context."""

    code: str = Field(min_length=1, max_length=200_000)
    language: str | None = Field(None, min_length=1, max_length=64)
    context: str | None = Field(None, max_length=50_000)


class DocumentationData(_Data):
    """documentation: content, documentType, audience."""

    content: str = Field(min_length=1, max_length=200_000)
    document_type: str = Field(alias="documentType", min_length=1, max_length=128)
    audience: str = Field(min_length=1, max_length=256)


class ArchitectureData(_Data):
    """architecture_analysis: systemDescription, requirements, constraints."""

    system_description: str = Field(alias="systemDescription", min_length=1, max_length=200_000)
    requirements: str = Field("", max_length=50_000)
    constraints: str = Field("", max_length=50_000)


SHAPES: dict[str, type[_Data]] = {
    "chat_completion": ChatCompletionData,
    "code_review": CodeReviewData,
    "documentation": DocumentationData,
    "architecture_analysis": ArchitectureData,
}


def parse_task_data(task_type: str, data: dict[str, Any]) -> _Data:
    """Validate a task's data against its type's shape (InvalidParameters naming the field)."""
    shape = SHAPES.get(task_type)
    if shape is None:
        raise InvalidParameters(
            f"unknown task type '{task_type[:64]}'; hosted agents handle: {', '.join(TASK_TYPES)}",
            details={"task_types": list(TASK_TYPES)},
        )
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        field = ".".join(str(p) for p in error["loc"]) or "task_data"
        raise InvalidParameters(
            f"invalid task_data for {task_type}: '{field}': {error['msg']}",
            details={"field": field, "task_type": task_type},
        ) from None


def _user_prompt(task_type: str, data: _Data, description: str) -> str:
    intro = f"Task: {description}\n\n" if description else ""
    if isinstance(data, CodeReviewData):
        context = f"Context: {data.context}\n\n" if data.context else ""
        language = data.language or ""
        return (
            f"{intro}{context}Review this {language + ' ' if language else ''}code. List "
            "problems by severity (security, correctness, performance, style) with fixes."
            f"\n\n```{language}\n{data.code}\n```"
        )
    if isinstance(data, DocumentationData):
        return (
            f"{intro}Write {data.document_type} documentation for this audience: "
            f"{data.audience}.\n\nMaterial:\n{data.content}"
        )
    if isinstance(data, ArchitectureData):
        return (
            f"{intro}Analyze this system's architecture: strengths, risks, and recommended "
            f"changes.\n\nSystem:\n{data.system_description}\n\nRequirements:\n"
            f"{data.requirements or '(none given)'}\n\nConstraints:\n"
            f"{data.constraints or '(none given)'}"
        )
    return intro.strip()


def role_instructions(
    template: RoleTemplate, task_type: str, collaboration: str | None = None
) -> str:
    """The system prompt: the role's, its prompt for this work, collaboration, tools."""
    return system_prompt(template, task_type, collaboration)


def build_messages(
    template: RoleTemplate,
    task_type: str,
    data: _Data,
    description: str,
    memory: ChatMessage | None,
    *,
    collaboration: str | None = None,
    thread_history: Sequence[ChatMessage] = (),
) -> list[ChatMessage]:
    """The conversation a task starts with: system prompt, memory, history, the work itself."""
    messages: list[ChatMessage] = [
        {"role": "system", "content": role_instructions(template, task_type, collaboration)}
    ]
    if memory is not None:
        messages.append(memory)
    messages.extend(thread_history)
    if isinstance(data, ChatCompletionData):
        if description:
            messages.append({"role": "system", "content": f"Task: {description}"})
        messages.extend({"role": m.role, "content": m.content} for m in data.messages)
    else:
        messages.append({"role": "user", "content": _user_prompt(task_type, data, description)})
    return messages


def text_of(data: _Data) -> str:
    """The task's own text (for complexity)."""
    if isinstance(data, ChatCompletionData):
        return " ".join(m.content for m in data.messages)
    return " ".join(str(v) for v in data.model_dump().values() if isinstance(v, str))
