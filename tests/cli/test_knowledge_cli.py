"""`bzzz knowledge search|show|export`: a project's facts from the data directory's store, as the
local user or as a token's principal (another project's token is refused)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bzzz.cli import main
from bzzz.config import Settings
from bzzz.eventlog import Caller
from bzzz.node.core import Node
from bzzz.principal import LOCAL, Scope

RETRIES = "Checkout retries carry idempotency keys; refunds do not."


async def bzzz(settings: Settings, *args: str) -> int:
    code: int = await asyncio.to_thread(main, ["--data-dir", str(settings.node.data_dir), *args])
    return code


async def _state(node: Node, project: str, obj: str, **extra: Any) -> dict[str, Any]:
    fact: dict[str, Any] = await node.knowledge.state(
        Caller("cli-test", LOCAL), project, "checkout retries", "carry", obj, **extra
    )
    return fact


async def _token(node: Node, project: str) -> str:
    _, secret = await node.access.create_token(
        LOCAL, f"{project}-team", [project], ["*"], Scope.READ, None
    )
    return secret


async def test_search_and_show_answer_a_projects_facts_with_its_token(
    node: Node, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    first = await _state(node, "shop", "no keys")
    second = await _state(node, "shop", "idempotency keys", statement=RETRIES)
    await _state(node, "garden", "GARDEN-ONLY")
    shop = await _token(node, "shop")

    assert await bzzz(settings, "knowledge", "search", "--token", shop, "retries", "--json") == 0
    found = json.loads(capsys.readouterr().out)
    assert await bzzz(settings, "knowledge", "search", "--project", "shop") == 0
    table = capsys.readouterr().out
    assert (
        await bzzz(settings, "knowledge", "show", first["id"], "--project", "shop", "--json") == 0
    )
    shown = json.loads(capsys.readouterr().out)

    assert [f["id"] for f in found["facts"]][:1] == [second["id"]]
    assert all(f["project"] == "shop" for f in found["facts"])
    assert second["id"] in table and "idempotency keys" in table
    assert shown["fact"]["id"] == first["id"]
    assert shown["fact"]["superseded_by"] == second["id"]


async def test_another_projects_token_is_refused_and_shows_nothing(
    node: Node, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    fact = await _state(node, "shop", "idempotency keys", statement=RETRIES)
    garden = await _token(node, "garden")

    searched = await bzzz(settings, "knowledge", "search", "--project", "shop", "--token", garden)
    searched_out = capsys.readouterr()
    shown = await bzzz(
        settings, "knowledge", "show", fact["id"], "--project", "shop", "--token", garden
    )
    shown_out = capsys.readouterr()
    unknown = await bzzz(settings, "knowledge", "search", "--project", "shop", "--token", "bzzz_x")
    unknown_err = capsys.readouterr().err

    assert searched == 1 and "bzzz:" in searched_out.err
    assert RETRIES not in searched_out.out + searched_out.err
    assert shown == 1 and RETRIES not in shown_out.out + shown_out.err
    assert unknown == 1 and "not a valid token" in unknown_err


async def test_export_writes_json_ld_and_graphiti_triplets(
    node: Node, settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await _state(node, "shop", "idempotency keys", statement=RETRIES)
    out = tmp_path / "shop.jsonld"

    assert await bzzz(settings, "knowledge", "export", "--project", "shop", "-o", str(out)) == 0
    assert (
        await bzzz(settings, "knowledge", "export", "--project", "shop", "--format", "graphiti")
        == 0
    )
    lines = capsys.readouterr().out.splitlines()

    document = json.loads(out.read_text())
    assert document["@id"] == "bzzz://shop/knowledge"
    kinds = [entry["@type"] for entry in document["@graph"]]
    assert kinds.count("Entity") == 2 and kinds.count("Fact") == 1
    [triplet] = [json.loads(line) for line in lines]
    assert triplet["source_node"]["name"] == "checkout retries"
    assert triplet["target_node"]["name"] == "idempotency keys"
    assert triplet["edge"]["name"] == "CARRY" and triplet["edge"]["fact"] == RETRIES
    assert triplet["edge"]["group_id"] == "shop"
    assert triplet["edge"]["source_node_uuid"] == triplet["source_node"]["uuid"]
