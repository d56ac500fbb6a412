"""The admin HTTP API (FastAPI), served by the proxy process on ``--admin-listen``."""
