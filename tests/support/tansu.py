"""The Tansu test broker lives in the package (the demo uses it too)."""

from shareproxy.embedded import TansuBroker, TansuUnavailable

__all__ = ["TansuBroker", "TansuUnavailable"]
