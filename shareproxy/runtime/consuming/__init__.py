"""Consuming: share-partition leaders, the partitions a node leads, reading ahead from the
upstream cluster, acknowledgement and group commit."""
