"""Archived records: copies of what was archived, dead-letter topics, and redrive."""
