"""The client of the real cluster (aiokafka connections, kio messages), used by the runtime
(``runtime/``) and the batch jobs."""
