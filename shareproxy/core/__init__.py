"""The pure core: share-partition leader and share-group logic with no I/O and no clock reads.

Time always comes in as an argument (milliseconds since the epoch), so every decision here can be
replayed exactly in a test.
"""
