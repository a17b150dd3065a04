"""Hosted LLM agents: model access, costs, roles, lifecycle, memory and the runtime."""
