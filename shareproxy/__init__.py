"""shareproxy: KIP-932 share groups for Kafka clusters that do not have them."""

__version__ = "0.1.0"
