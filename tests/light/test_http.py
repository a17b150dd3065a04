"""The light commands' HTTP: which node is asked, and one request over a plain socket."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bzzz.entry import _light
from bzzz.light import check, http


@pytest.mark.parametrize(
    ("url", "split"),
    [
        ("http://127.0.0.1:7331", ("http", "127.0.0.1", 7331, "")),
        ("https://bzzz.example/team/", ("https", "bzzz.example", 443, "/team/")),
        ("http://[::1]:8080/api/v1", ("http", "::1", 8080, "/api/v1")),
    ],
)
def test_a_node_url_is_split_into_its_parts(url: str, split: tuple[str, str, int, str]) -> None:
    assert http.split_url(url) == split


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:7331", "http://:80", "http://h:port"])
def test_what_is_not_an_http_url_is_unreachable(url: str) -> None:
    with pytest.raises(http.Unreachable):
        http.split_url(url)


def test_the_url_is_the_flag_then_the_variable_then_the_running_node_then_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("BZZZ_URL", "BZZZ_CONFIG", "BZZZ_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    slots = tmp_path / "slots"
    slots.mkdir()
    facts = {"pid": os.getpid(), "api_url": "http://127.0.0.1:9999/api/v1"}
    (slots / "0.serving.json").write_text(json.dumps(facts))
    gone = {"pid": 2**22 + 12345, "api_url": "http://127.0.0.1:1/api/v1"}
    (tmp_path / "empty" / "slots").mkdir(parents=True)
    (tmp_path / "empty" / "slots" / "0.serving.json").write_text(json.dumps(gone))

    served = http.node_url(None, str(tmp_path), None)
    flag = http.node_url("http://node:1/api/v1/", str(tmp_path), None)
    monkeypatch.setenv("BZZZ_URL", "http://env:2")
    variable = http.node_url(None, str(tmp_path), None)
    monkeypatch.delenv("BZZZ_URL")
    default = http.node_url(None, str(tmp_path / "empty"), None)

    assert (served, flag, variable, default) == (
        "http://127.0.0.1:9999",
        "http://node:1",
        "http://env:2",
        http.DEFAULT_URL,
    )


def test_a_chunked_answer_is_put_back_together() -> None:
    assert http._unchunk(b'4\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n') == b'{"a": 1}'


def test_the_entry_runs_the_check_itself_after_the_global_options_and_nothing_else() -> None:
    assert _light(["reservations", "check", "a", "--agent", "x"]) == (["a", "--agent", "x"], {})
    assert _light(["--data-dir", "/d", "--config=c.toml", "reservations", "check", "a"]) == (
        ["a"],
        {"data_dir": "/d", "config": "c.toml"},
    )
    assert _light(["reservations", "list"]) is None
    assert _light(["--data-dir"]) is None
    assert _light(["serve"]) is None


def test_paths_are_taken_relative_to_the_work_tree_as_git_takes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "src" / "api").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src")
    found = check.repository_paths(["api/x.py", str(tmp_path / "README.md"), "../docs/a.md"], None)
    with pytest.raises(ValueError, match="outside the repository"):
        check.repository_paths(["../../elsewhere.py"], None)

    assert found == ["src/api/x.py", "README.md", "docs/a.md"]
