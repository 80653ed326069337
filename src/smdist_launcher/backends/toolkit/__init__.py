"""The shared job toolkit: what every backend that runs hosts from a job folder uses.

The job folder and its record (jobdir, records), staging of code and channels (staging, source_tree), supervising
host processes (supervisor, process_sweep, stack_dumps), streaming their output (log_mux, job_console), outputs and
checkpoints (outputs) and the failure diagnosis (diagnosis). No backend-specific code lives here."""
