"""The audit trail: every agent action, hash-chained per node, its heads signed on the log.

``records`` holds the record's shape, its canonical form and the parameter digest;
``trail`` appends records off the hot path and publishes signed heads; ``verify`` checks a
chain and the heads; ``projection`` applies ``audit.head`` envelopes (registered with the
store by the trail); ``model`` records the hosted agents' model calls. The calls of the faces
are recorded beside them: ``mcp/audit.py`` (tool calls, resource reads), ``api/audit.py``
(HTTP changes), ``cli/audit.py``.
"""
