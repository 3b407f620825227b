"""The GNU-compatible hunk applier."""
