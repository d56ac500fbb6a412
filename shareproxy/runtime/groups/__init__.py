"""Share groups: the coordinator's heartbeat and assignment, group configs, and the groups'
administration (views, offset resets and deletion, in-flight records, retention)."""
