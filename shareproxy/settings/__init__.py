"""What a node is configured with: each setting, its bounds and default, and where its value came
from (a flag, a ``SHAREPROXY_*`` variable or the ``--config`` file)."""
