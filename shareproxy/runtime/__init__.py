"""The runtime the front ends call, in rooms that point down: the node directory, share groups,
archived records, consuming, the cluster's nodes, background jobs."""
