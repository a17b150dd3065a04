"""Conversations: messages, tasks and threads."""
