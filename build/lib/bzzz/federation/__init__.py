"""Federation: other networks whose agents this node can find and message."""
