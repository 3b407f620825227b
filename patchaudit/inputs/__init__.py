"""Inputs: patch files, Python and text sources, engine sources."""
