"""The runtime both front ends call (Kafka in ``kafka/``, REST in ``admin/``): share-partition
leaders, the partitions registry, the upstream feed, consumption for a member, the group
coordinator, group commit, group configs and group administration."""
