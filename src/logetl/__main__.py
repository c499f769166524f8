from logetl.cli import main

main()
