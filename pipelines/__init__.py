"""Getting data and running work on a clock: sources, store, jobs, scheduler, CLI, simulator."""
