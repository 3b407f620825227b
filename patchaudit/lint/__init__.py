"""The rule framework: Rule, Example, the registry of the rule pack."""
