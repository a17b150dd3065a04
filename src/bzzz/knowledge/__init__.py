"""The project's knowledge graph: facts from agents and threads' consensus, superseded in log
order, ranked the same on every node, read by agents and hosted agents' prompts."""
