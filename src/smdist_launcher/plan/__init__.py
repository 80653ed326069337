"""Launch plans: the pure function from a resolved job to what runs on each host.

Import from the modules (``plan.model``: the LaunchPlan schema, ``plan.planner``: ``build_plan``). This package
imports nothing itself: its pytest plugin is loaded by every pytest session, also on machines that have only the
runtime's dependencies (no pydantic).
"""
