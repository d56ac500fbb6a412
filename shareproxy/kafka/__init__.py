"""The Kafka front end: the listener, the dispatch table, what handlers share, one handler per
API. It calls the runtime (``runtime/``) and never the store or the upstream cluster directly."""
