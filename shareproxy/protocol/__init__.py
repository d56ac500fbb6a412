"""Sans-I/O Kafka wire layer on kio: framing, request/response codec, record-batch peeks."""
