"""`toolkit ship`: a run's deployable bundle, the files picked per target with their model card,
report page and web app."""
