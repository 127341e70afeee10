"""``python -m omniroute.cli`` → the ``omniroute`` command."""

from omniroute.cli.main import main

main()
