"""What a client sees when it connects: the seven tools with schemas, and the capabilities."""

from __future__ import annotations

from typing import Any

from mcp_checks import ClientFactory

TOOLS = {
    "bzzz_announce": {"agent_id", "role"},
    "bzzz_lookup": {"semantic_address"},
    "bzzz_get": {"address"},
    "bzzz_post": {"message_type", "content"},
    "bzzz_thread": {"action"},
    # event_types is needed to subscribe, not to unsubscribe (the service says so).
    "bzzz_subscribe": set(),
    # paths are needed to reserve, not to list, release or renew (the service says so).
    "bzzz_reserve": set(),
}

OPTIONAL = {
    "bzzz_announce": {"capabilities", "specialization", "max_tasks"},
    "bzzz_lookup": {"filter_criteria"},
    "bzzz_get": {"include_metadata", "max_history", "before", "after"},
    "bzzz_post": {"priority", "thread_id", "target_address"},
    "bzzz_thread": {"thread_id", "participants", "topic"},
    "bzzz_subscribe": {
        "event_types",
        "filter_address",
        "callback_webhook",
        "action",
        "subscription_id",
    },
    "bzzz_reserve": {"action", "paths", "mode", "ttl", "reason", "reservation_id", "agent_id"},
}

DEFAULTS = {
    ("bzzz_announce", "max_tasks"): 3,
    ("bzzz_get", "include_metadata"): True,
    ("bzzz_get", "max_history"): 10,
    ("bzzz_post", "priority"): "medium",
    ("bzzz_reserve", "action"): "reserve",
    ("bzzz_reserve", "mode"): "exclusive",
    ("bzzz_reserve", "ttl"): 1800,
}

OUTPUT_FIELDS = {
    "bzzz_announce": {"message", "agent"},
    "bzzz_lookup": {"address", "parsed_address", "matches", "count", "query_time"},
    "bzzz_get": {"address", "content", "metadata", "retrieved_at"},
    "bzzz_post": {"message_id", "target_address", "message_type", "delivery_results", "posted_at"},
    "bzzz_thread": {"action", "thread_id", "result", "timestamp"},
    "bzzz_subscribe": {
        "subscription_id",
        "event_types",
        "filter_address",
        "subscribed_at",
        "status",
    },
    "bzzz_reserve": {"action", "reservation", "reservations", "released", "count"},
}
ERROR_FIELDS = {"success", "error", "code", "details", "timestamp"}


async def _tools(connect: ClientFactory) -> dict[str, Any]:
    async with connect() as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tools_list_has_the_seven_tools_with_input_and_output_schemas(
    connect: ClientFactory,
) -> None:
    listed = await _tools(connect)

    assert set(listed) == set(TOOLS)
    for name, required in TOOLS.items():
        tool = listed[name]
        assert tool.description and len(tool.description) > 80, name
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert set(schema.get("required", [])) == required, name
        assert required | OPTIONAL[name] <= set(schema["properties"]), name
        assert tool.output_schema is not None, name
        assert tool.output_schema["type"] == "object"


async def test_tool_parameters_carry_the_reference_defaults(connect: ClientFactory) -> None:
    listed = await _tools(connect)

    for (name, param), default in DEFAULTS.items():
        assert listed[name].input_schema["properties"][param]["default"] == default


async def test_output_schemas_describe_the_reference_fields_and_the_error_response(
    connect: ClientFactory,
) -> None:
    listed = await _tools(connect)

    for name, fields in OUTPUT_FIELDS.items():
        properties = set(listed[name].output_schema["properties"])
        assert fields | ERROR_FIELDS <= properties, name
        # One schema fits success and ErrorResponse: clients that validate error results pass.
        assert listed[name].output_schema.get("required", []) == ["success"], name


async def test_capabilities_advertise_logging_completions_and_resource_subscriptions(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        caps = client.server_capabilities

    assert caps is not None
    assert caps.logging is not None
    assert caps.completions is not None
    assert caps.resources is not None and caps.resources.subscribe is True
    assert caps.tools is not None


async def test_a_legacy_client_gets_the_session_protocol_real_hosts_use(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "bzzz"
