"""The built-in rule pack: one module per rule (installed as `patchaudit.rules`).

Modules whose name starts with an underscore hold helpers shared by rules.
"""
