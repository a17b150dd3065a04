"""Privacy: personal data and secrets masked before text reaches a model or the store."""
