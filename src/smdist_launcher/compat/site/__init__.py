"""The directory put on PYTHONPATH of user processes (a package only so that wheels ship it)."""
