"""The audit trail: every agent action, hash-chained per node, its heads signed on the log.

``records`` holds the record's shape, its canonical form and the parameter digest;
``trail`` appends records off the hot path and publishes signed heads; ``verify`` checks a
chain and the heads; ``projection`` applies ``audit.head`` envelopes; ``hooks`` records the
MCP, HTTP, CLI and model calls.
"""
