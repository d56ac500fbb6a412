"""The client of the real cluster (aiokafka connections, kio messages), used by the runtime
(``broker/``) and the batch jobs."""
