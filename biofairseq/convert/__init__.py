"""Arrives with its own issue; imported only by the commands that need it."""
