"""Facts over MCP: bzzz_post states one to bzzz://*@PROJECT/knowledge, bzzz_get reads them by
entity and words; bad forms answer the reference's ErrorResponse naming the field."""

from __future__ import annotations

from mcp_checks import ClientFactory, announce, assert_error_response, call_ok

KNOWLEDGE = "bzzz://*@shop/knowledge"


async def test_a_fact_posted_over_mcp_is_read_back_by_entity_and_words(
    connect: ClientFactory,
) -> None:
    async with connect() as arch:
        tools = {t.name: t for t in (await arch.list_tools()).tools}
        await announce(arch, "arch-1", project="shop")
        fact = {"subject": "checkout", "relation": "retries with", "object": "idempotency keys"}
        posted = await call_ok(
            arch,
            "bzzz_post",
            {"target_address": KNOWLEDGE, "message_type": "fact", "content": fact},
        )
        by_entity = await call_ok(arch, "bzzz_get", {"address": KNOWLEDGE, "about": "Checkout"})
        by_words = await call_ok(
            arch, "bzzz_get", {"address": KNOWLEDGE, "q": "idempotency", "limit": 5}
        )
        bad = await arch.call_tool(
            "bzzz_post",
            {"target_address": KNOWLEDGE, "message_type": "fact", "content": {"subject": "x"}},
        )
        too_many = await arch.call_tool("bzzz_get", {"address": KNOWLEDGE, "limit": 1000})
        one = await call_ok(arch, "bzzz_get", {"address": f"{KNOWLEDGE}/{posted['fact']['id']}"})

    assert {"about", "q", "limit"} <= tools["bzzz_get"].input_schema["properties"].keys()
    assert posted["fact"]["author"] == "arch-1"
    assert [f["id"] for f in by_entity["content"]["facts"]] == [posted["fact"]["id"]]
    assert by_words["content"]["facts"] == by_entity["content"]["facts"]
    assert by_entity["metadata"]["content_type"] == "knowledge"
    assert one["content"]["fact"] == posted["fact"]
    assert assert_error_response(bad, "INVALID_PARAMETERS")["details"]["field"] == "relation"
    assert assert_error_response(too_many, "INVALID_PARAMETERS")["details"]["field"] == "limit"
