"""The container runtime `smdist-train` (see README.md in this folder). Imports the stdlib only."""
