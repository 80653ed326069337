"""One attempt module for every backend that stages hosts from a job folder (process, netns, docker, Slurm).

- kept_layout.py: where an attempt's host trees live (hosts/<host>/, then attempts/<n>/<host>/ once it ended);
- host_staging.py: a host tree staged from scratch, the same way for every attempt;
- book.py: the attempt records (times, causes, decisions), kept in memory and saved under a lock;
- loop.py: the loop that asks the restart policy and carries out its decision."""
