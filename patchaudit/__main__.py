from patchaudit.cli import main

main()
