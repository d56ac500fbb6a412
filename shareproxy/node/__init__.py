"""The composition root: a node's phased start and stop, its startup checks, the wiring of the
runtime and front ends from the settings, and what the node holds right now."""
