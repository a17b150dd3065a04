"""The light check's own reading of its arguments: a well-formed check without argparse, and
everything else left to argparse (help, mistakes), as the whole CLI would answer them."""

from __future__ import annotations

import pytest

from bzzz.light import check


def test_a_well_formed_check_is_read_without_argparse() -> None:
    args = check.quick_parse(
        ["src/a.py", "--agent", "bob", "--json", "--source=guard", "--timeout", "2", "--", "-x"]
    )

    assert args is not None
    assert args.paths == ["src/a.py", "-x"] and args.agent == "bob"
    assert (args.json, args.enforce, args.source, args.timeout) == (True, False, "guard", 2.0)
    assert (args.url, args.token, args.root) == (None, None, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["src/a.py"],  # no agent
        ["--agent", "bob"],  # no path
        ["src/a.py", "--agent"],
        ["src/a.py", "--agent", "bob", "--source", "robot"],
        ["src/a.py", "--agent", "bob", "--frobnicate"],
        ["src/a.py", "--agent", "bob", "--timeout", "soon"],
    ],
)
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert check.quick_parse(argv) is None


def test_argparse_answers_help_with_0_and_a_mistake_with_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert check.main(["--help"]) == 0
    assert "--agent" in capsys.readouterr().out
    assert check.main(["src/a.py", "--source", "robot", "--agent", "bob"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_an_answer_that_is_not_a_checks_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import http.server
    import threading

    class NotANode(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = b'{"hello": "world"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotANode)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        status = check.main(["a.py", "--agent", "bob", "--url", url, "--root", "."])
    finally:
        server.shutdown()
        serving.join(5)

    assert status == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "bzzz: the node's answer is not a check's answer"
    ]
