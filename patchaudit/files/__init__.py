"""The one guarded file reader (size, FIFO/device and symlink guards) and the safe file system helpers."""
