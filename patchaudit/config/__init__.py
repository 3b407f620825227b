"""What one run is: its settings (pyproject.toml and the command line) and the catalogue of rules
they select from (the registry)."""
