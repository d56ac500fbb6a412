"""``python -m shareproxy.cli``, as the console script."""

from shareproxy.cli.app import main

main()
