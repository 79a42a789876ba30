"""What a user runs on a compiled model besides building it: verify, the report, inspect."""
