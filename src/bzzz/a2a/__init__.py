"""The A2A bridge, outward: A2A agents elsewhere put on the network and reached over A2A.

``cards`` fetches and verifies a remote agent's card, ``guard`` keeps every request of the
bridge to the webhook SSRF rules, ``registry`` holds the remote agents a data directory hosts,
``bridge`` announces them and delivers their posts and tasks. The other way (BZZZ agents as A2A
agents) is a face: ``bzzz.api.a2a``.
"""
