"""The process and its operating system: sockets, cores, the allocator, child processes, the
terminal, and the exit codes the command-line entry points end with."""
