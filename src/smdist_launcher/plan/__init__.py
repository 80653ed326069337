"""Launch plans: the pure function from a resolved job to what runs on each host."""
from .model import Channel, HostPlan, LaunchPlan, Master

__all__ = ["Channel", "HostPlan", "LaunchPlan", "Master"]
