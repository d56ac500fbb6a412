"""Tables modelled on KIP-932's ShareSnapshot / ShareUpdate records.

One snapshot row per share-partition holds the folded state (state epoch, snapshot epoch, start
offset, state batches as ``[first, last, state, count]`` rows); each write appends an update row,
and every N updates are folded into a new snapshot.
"""

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    UniqueConstraint,
    Uuid,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

Json = JSON().with_variant(JSONB(), "postgresql")
# SQLite only auto-increments an INTEGER PRIMARY KEY.
AutoId = BigInteger().with_variant(Integer(), "sqlite")

share_groups = Table(
    "share_groups",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("group_type", String(16), nullable=False, server_default="share"),
    Column("configs", Json, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # Membership as the expiry rules need it (migration 0003): the topics the live group
    # subscribes to (NULL until a member joined), when that set last changed, and since when
    # the group has had no members (NULL while it has some).
    Column("subscribed_topics", Json, nullable=True),
    Column("subscription_changed_at", DateTime(timezone=True), nullable=True),
    Column("empty_since", DateTime(timezone=True), nullable=True),
)

share_snapshots = Table(
    "share_snapshots",
    metadata,
    Column(
        "group_id",
        String(255),
        ForeignKey("share_groups.group_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("topic_id", Uuid(), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("state_epoch", Integer, nullable=False),
    Column("snapshot_epoch", Integer, nullable=False),
    Column("start_offset", BigInteger, nullable=False),
    Column("state_batches", Json, nullable=False),
    Column("update_count", Integer, nullable=False, server_default="0"),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # The topic's name when the state was created (0003): a recreated topic keeps its name but
    # not its id, and only the name tells "recreated" from "deleted".
    Column("topic_name", String(255), nullable=True),
)

share_updates = Table(
    "share_updates",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("group_id", String(255), nullable=False),
    Column("topic_id", Uuid(), nullable=False),
    Column("partition", Integer, nullable=False),
    Column("state_epoch", Integer, nullable=False),
    Column("snapshot_epoch", Integer, nullable=False),
    Column("start_offset", BigInteger, nullable=False),
    Column("state_batches", Json, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    ForeignKeyConstraint(
        ["group_id", "topic_id", "partition"],
        ["share_snapshots.group_id", "share_snapshots.topic_id", "share_snapshots.partition"],
        ondelete="CASCADE",
        name="fk_share_updates_share_snapshots",
    ),
    Index("ix_share_updates_partition", "group_id", "topic_id", "partition", "id"),
)

# A share group's push (migration 0009): the ``PushSpec`` in its stored form, the
# authorization among it (a secret: the admin API never shows it back).
share_group_push = Table(
    "share_group_push",
    metadata,
    Column(
        "group_id",
        String(255),
        ForeignKey("share_groups.group_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("spec", Json, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Archived records that had been delivered (delivery count >= 1: rejected, or past the delivery
# limit), written in the transaction that archived them: SPSO moves past them and the state
# forgets them, but the poison report and the archived list must still show them. ``reason``
# is null for ranges archived before it was kept; ``redriven_at`` is set, before the produce,
# by the redrive that copies a range back to its source topic, so it is produced once.
share_archived = Table(
    "share_archived",
    metadata,
    Column("group_id", String(255), primary_key=True),
    Column("topic_id", Uuid(), primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("first_offset", BigInteger, primary_key=True),
    Column("last_offset", BigInteger, nullable=False),
    Column("delivery_count", SmallInteger, nullable=False),
    Column("archived_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("reason", String(32), nullable=True),
    Column("redriven_at", DateTime(timezone=True), nullable=True),
)

# Security: SCRAM credentials, ACL bindings and admin API bearer tokens. Passwords are
# never stored: a credential is the salted, iterated SCRAM form (RFC 5802 StoredKey/ServerKey).
scram_credentials = Table(
    "scram_credentials",
    metadata,
    Column("username", String(255), primary_key=True),
    Column("mechanism", String(32), primary_key=True),  # SCRAM-SHA-256 | SCRAM-SHA-512
    Column("salt", LargeBinary, nullable=False),
    Column("stored_key", LargeBinary, nullable=False),
    Column("server_key", LargeBinary, nullable=False),
    Column("iterations", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

acls = Table(
    "acls",
    metadata,
    Column("id", AutoId, primary_key=True, autoincrement=True),
    Column("principal", String(255), nullable=False),
    Column("host", String(255), nullable=False),
    Column("resource_type", SmallInteger, nullable=False),
    Column("resource_name", String(255), nullable=False),
    Column("pattern_type", SmallInteger, nullable=False),
    Column("operation", SmallInteger, nullable=False),
    Column("permission", SmallInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint(
        "principal",
        "host",
        "resource_type",
        "resource_name",
        "pattern_type",
        "operation",
        "permission",
        name="uq_acls_binding",
    ),
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),  # SHA-256 of the token, hex
    Column("username", String(255), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_api_tokens_username", "username"),
)

# The proxy nodes of a cluster and their leases (migration 0004).
proxy_nodes = Table(
    "proxy_nodes",
    metadata,
    Column("node_id", Integer, primary_key=True, autoincrement=False),
    Column("incarnation", String(32), nullable=False),
    Column("listeners", Json, nullable=False),  # {"PLAINTEXT": ["host", 9092], …}
    Column("registered_at", DateTime(timezone=True), nullable=False),
    Column("lease_expires_at", DateTime(timezone=True), nullable=False),
    # the newest generation the node acts on: others take over from it once it has seen theirs
    Column("seen_generation", BigInteger, nullable=False, server_default="0"),
    # where its REST admin API answers other nodes (null: a node that advertises none)
    Column("admin_url", String(2048), nullable=True),
    # the newest placement rule the node's build knows (core/placement.py): a fleet places by
    # the oldest rule of its live nodes; 1 for builds that predate the column
    Column("placement_rule", SmallInteger, nullable=False, server_default="1"),
)

# the topic catalogue placement spreads partitions by, raising the generation with each change:
# each upstream topic's partition count, in the order topics entered it (the generation they
# entered at, then their id); a topic deleted from the upstream cluster stays as a tombstone, so
# a node whose metadata is older cannot add it again (topic ids are never reused)
proxy_topics = Table(
    "proxy_topics",
    metadata,
    Column("topic_id", Uuid(), primary_key=True),
    Column("partitions", Integer, nullable=False),
    Column("entered", BigInteger, nullable=False),
    Column("deleted", Boolean, nullable=False, server_default=false()),
)

# one row (id 1): the generation of the live node set, raised with each change of it
proxy_cluster = Table(
    "proxy_cluster",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("generation", BigInteger, nullable=False),
    # raised with every change of a group's configs (migration 0006): each node reads the
    # configs again when it moves, so a change made through one node reaches all
    Column("configs_version", BigInteger, nullable=False, server_default="0"),
)
