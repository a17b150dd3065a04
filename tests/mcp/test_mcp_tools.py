"""Each tool's success path answers the API reference's fields as structuredContent."""

from __future__ import annotations

from mcp_checks import ClientFactory, announce, call_ok, iso_time


async def test_announce_answers_the_agent_as_the_reference_shows_it(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        result = await call_ok(
            client,
            "bzzz_announce",
            {
                "agent_id": "architect-001",
                "role": "architect",
                "capabilities": ["system_design", "architecture_review"],
                "specialization": "distributed_systems",
            },
        )

    assert result["message"] == "Agent architect-001 (architect) announced to BZZZ network"
    agent = result["agent"]
    assert agent["id"] == "architect-001"
    assert agent["role"] == "architect"
    assert agent["capabilities"] == ["system_design", "architecture_review"]
    assert agent["specialization"] == "distributed_systems"
    assert agent["status"] == "idle"
    assert agent["max_tasks"] == 3


async def test_the_same_session_re_announcing_updates_its_agent(connect: ClientFactory) -> None:
    async with connect() as client:
        await announce(client, "architect-001", capabilities=["a"])
        result = await announce(client, "architect-001", role="reviewer", max_tasks=5)
        found = await call_ok(client, "bzzz_lookup", {"semantic_address": "bzzz://architect-001"})

    assert result["agent"]["role"] == "reviewer"
    assert result["agent"]["max_tasks"] == 5
    assert [m["role"] for m in found["matches"]] == ["reviewer"]


async def test_lookup_parses_the_address_and_answers_scored_matches(
    connect: ClientFactory,
) -> None:
    address = "bzzz://*:architect@myproject:api_design"
    async with connect() as client:
        await announce(
            client,
            "architect-001",
            capabilities=["system_design", "api_design"],
            project="myproject",
            task="api_design",
        )
        await announce(client, "architect-002", project="otherproject")
        await announce(client, "reviewer-001", role="reviewer")
        result = await call_ok(client, "bzzz_lookup", {"semantic_address": address})

    assert result["address"] == address
    assert result["parsed_address"] == {
        "agent": None,
        "role": "architect",
        "project": "myproject",
        "task": "api_design",
        "path": None,
        "raw": address,
    }
    assert [m["id"] for m in result["matches"]] == ["architect-001"]
    match = result["matches"][0]
    assert match["role"] == "architect"
    assert match["capabilities"] == ["system_design", "api_design"]
    assert match["available"] is True
    assert 0 <= match["performance"] <= 1
    assert 0 <= match["score"] <= 100
    assert result["count"] == 1
    iso_time(result["query_time"])


async def test_lookup_filters_on_expertise_and_ranks_best_first(connect: ClientFactory) -> None:
    async with connect() as client:
        await announce(client, "rev-a", role="reviewer", capabilities=["security_analysis"])
        await announce(client, "rev-b", role="reviewer", capabilities=["style"])
        await announce(
            client, "rev-c", role="reviewer", specialization="security_analysis and crypto"
        )
        result = await call_ok(
            client,
            "bzzz_lookup",
            {
                "semantic_address": "bzzz://*:reviewer@*:*",
                "filter_criteria": {"expertise": ["security_analysis"], "availability": True},
            },
        )

    assert sorted(m["id"] for m in result["matches"]) == ["rev-a", "rev-c"]
    scores = [m["score"] for m in result["matches"]]
    assert scores == sorted(scores, reverse=True)
    assert result["count"] == 2


async def test_get_answers_agent_info_activity_tasks_and_metadata(connect: ClientFactory) -> None:
    async with connect() as client:
        await announce(client, "architect-001")
        result = await call_ok(client, "bzzz_get", {"address": "bzzz://architect-001"})
        bare = await call_ok(
            client, "bzzz_get", {"address": "bzzz://architect-001", "include_metadata": False}
        )

    assert result["address"] == "bzzz://architect-001"
    info = result["content"]["agent_info"]
    assert (info["id"], info["role"], info["status"]) == ("architect-001", "architect", "idle")
    assert 0 <= info["performance"] <= 1
    assert isinstance(result["content"]["recent_activity"], list)
    assert result["content"]["current_tasks"] == []
    assert result["metadata"]["content_type"] == "agent_data"
    assert result["metadata"]["version"] == "1.0"
    iso_time(result["metadata"]["last_updated"])
    iso_time(result["retrieved_at"])
    assert "metadata" not in bare


async def test_post_delivers_to_the_addressed_agent_and_reports_delivery(
    connect: ClientFactory,
) -> None:
    target = "bzzz://reviewer-001:reviewer@*:*"
    async with connect() as sender, connect() as receiver:
        await announce(sender, "architect-001")
        await announce(receiver, "reviewer-001", role="reviewer")
        result = await call_ok(
            sender,
            "bzzz_post",
            {
                "target_address": target,
                "message_type": "review_request",
                "content": {"text": "please review the API"},
                "priority": "high",
            },
        )
        inbox = await call_ok(receiver, "bzzz_get", {"address": "bzzz://reviewer-001/inbox"})

    assert result["message_id"]
    assert result["target_address"] == target
    assert result["message_type"] == "review_request"
    delivery = result["delivery_results"]
    assert delivery["delivered"] is True
    assert delivery["recipients"] == ["reviewer-001"]
    assert isinstance(delivery["delivery_time"], int | float) and delivery["delivery_time"] >= 0
    iso_time(result["posted_at"])
    [message] = inbox["content"]["messages"]
    assert message["id"] == result["message_id"]
    assert message["sender"] == "architect-001"
    assert message["content"] == {"text": "please review the API"}
    assert message["priority"] == "high"


async def test_a_task_assignment_creates_a_pending_task_that_its_assignee_completes(
    connect: ClientFactory,
) -> None:
    async with connect() as lead, connect() as worker:
        await announce(lead, "architect-001")
        await announce(worker, "coder-001", role="coder")
        assigned = await call_ok(
            lead,
            "bzzz_post",
            {
                "target_address": "bzzz://coder-001",
                "message_type": "task_assignment",
                "content": {"task_type": "code_review", "description": "review the parser"},
            },
        )
        task_id = assigned["tasks"]["coder-001"]
        pending = await call_ok(worker, "bzzz_get", {"address": "bzzz://coder-001"})
        await call_ok(
            worker,
            "bzzz_post",
            {
                "target_address": "bzzz://architect-001",
                "message_type": "task_complete",
                "content": {"task_id": task_id, "result": "looks good"},
            },
        )
        done = await call_ok(worker, "bzzz_get", {"address": "bzzz://coder-001/tasks"})

    [task] = pending["content"]["current_tasks"]
    assert (task["id"], task["status"], task["type"]) == (task_id, "pending", "code_review")
    [finished] = done["content"]["tasks"]
    assert (finished["id"], finished["status"]) == (task_id, "completed")


async def test_thread_create_list_join_leave_and_summarize(connect: ClientFactory) -> None:
    async with connect() as creator, connect() as other:
        await announce(creator, "architect-001")
        await announce(other, "reviewer-001", role="reviewer")
        created = await call_ok(
            creator,
            "bzzz_thread",
            {"action": "create", "topic": "API Design Review", "participants": ["reviewer-001"]},
        )
        thread_id = created["thread_id"]
        listed = await call_ok(creator, "bzzz_thread", {"action": "list"})
        left = await call_ok(other, "bzzz_thread", {"action": "leave", "thread_id": thread_id})
        joined = await call_ok(other, "bzzz_thread", {"action": "join", "thread_id": thread_id})
        summary = await call_ok(
            creator, "bzzz_thread", {"action": "summarize", "thread_id": thread_id}
        )

    assert created["action"] == "create"
    result = created["result"]
    assert result["id"] == thread_id
    assert result["topic"] == "API Design Review"
    assert sorted(result["participants"]) == ["architect-001", "reviewer-001"]
    assert result["creator"] == "architect-001"
    assert result["status"] == "active"
    iso_time(result["created_at"])
    iso_time(created["timestamp"])

    assert listed["action"] == "list"
    [entry] = listed["result"]
    assert entry["id"] == thread_id
    assert entry["topic"] == "API Design Review"
    assert entry["status"] == "active"
    assert entry["message_count"] == 0
    iso_time(entry["last_activity"])

    assert left["result"]["participants"] == ["architect-001"]
    assert sorted(joined["result"]["participants"]) == ["architect-001", "reviewer-001"]
    assert summary["action"] == "summarize"
    assert summary["thread_id"] == thread_id


async def test_subscribe_answers_the_subscription_and_its_resource(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        result = await call_ok(
            client,
            "bzzz_subscribe",
            {
                "event_types": ["agent_announcement", "task_assignment"],
                "filter_address": "bzzz://*:architect@*",
            },
        )

    assert result["subscription_id"]
    assert result["event_types"] == ["agent_announcement", "task_assignment"]
    assert result["filter_address"] == "bzzz://*:architect@*"
    iso_time(result["subscribed_at"])
    assert result["status"] == "active"
    assert result["resource_uri"] == f"bzzz://subscriptions/{result['subscription_id']}"


async def test_subscribe_with_a_webhook_hands_back_its_signing_secret(
    connect: ClientFactory,
) -> None:
    async with connect() as client:
        result = await call_ok(
            client,
            "bzzz_subscribe",
            {"event_types": ["thread_created"], "callback_webhook": "https://example.com/hook"},
        )

    assert result["callback_webhook"] == "https://example.com/hook"
    assert len(result["webhook_secret"]) >= 32
    assert "X-Bzzz-Signature" in result["signature_header"]
