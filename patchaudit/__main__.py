from patchaudit.cli import run

run()
