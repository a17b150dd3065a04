"""The light commands: what git hooks and agent runners call before each write.

They run as a new process many times a minute, so they start fast: the standard library only
(``http.client``, ``json``, ``argparse``), no settings, database, NATS or web library, and
they talk to a running node over its HTTP API. ``bzzz.entry`` is the `bzzz` executable's
entry point: it runs these commands itself and hands every other one to ``bzzz.cli``.

    http     where the node answers (URL, token) and one JSON request to it
    check    `bzzz reservations check PATH… --agent ID`
    hooks    `bzzz hooks run session-start|prompt|pre-tool` (Claude Code's hooks)
    worktree what `bzzz guard install` keeps for a work tree (agent, token, URL)
"""
