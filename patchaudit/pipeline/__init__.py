"""Analyse files, apply suppressions, schedule work, cache, and drive check, bump and inventory."""
