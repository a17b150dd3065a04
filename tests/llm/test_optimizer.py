"""The cost optimizer and offline token counting."""

from __future__ import annotations

from bzzz.config import CostSettings, OpenAISettings
from bzzz.llm import tokens
from bzzz.llm.optimizer import CostOptimizer, complexity


def optimizer(**cost: object) -> CostOptimizer:
    return CostOptimizer(CostSettings.model_validate(cost), OpenAISettings())


def conversation(n: int, words: int = 5) -> list[dict[str, object]]:
    system = [{"role": "system", "content": "You are terse."}]
    turns = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i}. " + "word " * words,
        }
        for i in range(n)
    ]
    return system + turns


def test_token_counts_are_offline_deterministic_and_grow_with_text() -> None:
    short = tokens.count_text("Hello, world!")
    long = tokens.count_text("Hello, world! " * 100)

    assert short == tokens.count_text("Hello, world!") == 4
    assert 90 * short < long <= 100 * short
    assert tokens.count_messages([{"role": "user", "content": "Hello, world!"}]) == 4 + 4 + 3


def test_simple_tasks_go_to_the_cheaper_model_and_hard_ones_do_not() -> None:
    opt = optimizer(complexity_threshold=0.3)

    assert opt.choose_model("chat_completion", "hi", None) == (
        "gpt-5-mini",
        complexity("chat_completion", "hi"),
    )
    assert opt.choose_model("architecture_analysis", "hi", None)[0] == "gpt-5"
    assert opt.choose_model("chat_completion", "word " * 5000, None)[0] == "gpt-5"
    assert opt.choose_model("chat_completion", "hi", "gpt-4o")[0] == "gpt-4o"


def test_past_80_percent_of_the_budget_old_messages_become_a_summary() -> None:
    messages = conversation(10, words=40)
    budget = int(tokens.count_messages(messages) / 0.81)
    opt = optimizer(token_budget=budget, max_messages_before_summary=100)

    fitted, dropped = opt.fit(messages)

    assert dropped == 6
    assert fitted[0] == messages[0]
    assert fitted[1]["role"] == "system"
    assert str(fitted[1]["content"]).startswith("Summary of 6 earlier messages")
    assert "Message 0." in str(fitted[1]["content"])
    assert fitted[2:] == messages[-4:]
    assert tokens.count_messages(fitted) < tokens.count_messages(messages)


def test_under_the_budget_and_the_count_nothing_changes() -> None:
    messages = conversation(10)
    opt = optimizer(token_budget=100_000, max_messages_before_summary=20)

    assert opt.fit(messages) == (messages, 0)


def test_past_the_message_count_the_conversation_is_summarized_and_truncated() -> None:
    messages = conversation(30)
    opt = optimizer(token_budget=1_000_000, max_messages_before_summary=6)

    fitted, dropped = opt.fit(messages)

    assert dropped == 27
    assert len(fitted) == 1 + 1 + 3
    assert fitted[-3:] == messages[-3:]


def test_a_tool_answer_is_never_cut_off_from_its_call() -> None:
    messages = [
        {"role": "system", "content": "s"},
        *conversation(6)[1:],
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, {"id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
        {"role": "tool", "tool_call_id": "c3", "content": "c"},
    ]
    opt = optimizer(token_budget=1_000_000, max_messages_before_summary=8)

    fitted, _ = opt.fit(messages)

    assert fitted[2]["role"] == "assistant" and "tool_calls" in fitted[2]
