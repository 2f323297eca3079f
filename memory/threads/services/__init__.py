"""Writes of thread state: threads and events, checkpoints and tool calls, summaries, purges."""
