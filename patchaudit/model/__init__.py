"""The data every layer shares: findings, traces, file errors, and text escaping for output."""
