"""The ``shareproxy`` command: ``app`` composes the commands of the modules beside it."""
