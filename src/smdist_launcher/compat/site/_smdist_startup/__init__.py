"""What ``sitecustomize`` does at the start of every user process, one job per module (stdlib only, no
smdist_launcher import at module level: these run before anything else in the user's interpreter)."""
