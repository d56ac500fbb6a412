"""``python -m shareproxy.cli``, as the console script."""

from shareproxy.cli.launch import main

main()
