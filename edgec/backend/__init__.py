"""The back end: schedule and plan the arena, name each layer's kernel, emit the C directory."""
