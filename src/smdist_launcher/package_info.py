"""What this package is: its version and the folder it is imported from. A module of the lowest layer, so that any
layer may read them without importing the package root (the root is the lazy facade above every layer)."""
from __future__ import annotations

import os

__version__ = "0.1.0"

# The folder that holds the smdist_launcher package (a checkout's src/, or site-packages): what a process needs on
# its import path to import us.
IMPORT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
