"""Retention and erasure: content ages out, or is forgotten, on every node and on the log.

See ``service.py`` for how a run travels the log, ``network/restate.py`` for how a node that
replays the log after a purge still rebuilds every surviving agent, thread and task.
"""
