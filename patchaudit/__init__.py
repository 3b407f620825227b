"""patchaudit: a linter and auditor for patch sets against inference engines."""

__version__ = "0.1.0"
