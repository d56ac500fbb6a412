"""What a node tells its operators: Prometheus metrics (also under Kafka's names) and logs."""
