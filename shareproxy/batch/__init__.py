"""The batch front end: what the Spark jobs in ``spark/`` share (sources over the state store
and the cluster, the job runtime, repairs through the store)."""
