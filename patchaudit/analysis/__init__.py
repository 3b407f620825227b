"""Code analysis with no findings, no rule codes and no I/O: CST helpers, dataflow,
monkey-patch recognition, signatures, upstream changes."""
