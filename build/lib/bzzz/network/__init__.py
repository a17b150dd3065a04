"""Connections to the NATS event log."""
