"""Share groups: the coordinator's heartbeat and assignment, group configs, and the groups'
administration (views, offset resets and deletion, in-flight records, retention). The face is
``GroupAdmin`` (every group use case) and the ``Coordinator`` (ShareGroupHeartbeat)."""

from shareproxy.runtime.groups.coordinator import Coordinator
from shareproxy.runtime.groups.group_admin import GroupAdmin
from shareproxy.runtime.groups.group_summaries import Listed
from shareproxy.runtime.groups.group_views import GroupView

__all__ = ["Coordinator", "GroupAdmin", "GroupView", "Listed"]
