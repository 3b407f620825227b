"""`patchaudit server`: the language server (pygls over stdio), between the reporters and
the commands.  `project.py` keeps a project warm (configuration, rules, engines, the
whole-repository summaries) and checks a buffer as `check -` checks standard input;
`convert.py` turns findings into diagnostics, quick fixes and hovers; `lsp.py` holds the
server's state and scheduling (debounce, one worker thread); `features.py` its handlers."""
