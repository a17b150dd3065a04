"""Snapshots: a node's state written to the network's object store, loaded by new nodes."""
