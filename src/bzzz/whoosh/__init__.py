"""WHOOSH registration (design §4.2): hosted agents registered, health reported, deregistered.

``models.py`` holds the wire shapes (``AgentRegistration``), ``client.py`` the HTTP calls to
WHOOSH, ``registrar.py`` the per-agent loops a node runs while its hosted agents are up.
"""
