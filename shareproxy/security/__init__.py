"""Authentication (SASL PLAIN / SCRAM, TLS client certificates) and ACL enforcement."""
