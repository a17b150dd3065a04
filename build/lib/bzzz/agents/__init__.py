"""Agents: announcement, discovery, retrieval, session lifetimes."""
