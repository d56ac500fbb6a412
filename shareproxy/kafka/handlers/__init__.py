"""One module per Kafka API the proxy serves; ``served`` lists them with their versions."""
