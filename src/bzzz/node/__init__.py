"""The node: the composition root (``core.Node``) and what a local process holds.

``core`` builds, runs and stops every service; ``slots`` is the data directory's slot;
``network`` joins the bus and the admitted set; ``forward`` is the front door;
``admin`` and ``status`` answer ``bzzz node`` and ``/healthz``.
"""
