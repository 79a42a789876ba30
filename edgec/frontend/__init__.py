"""The front end: load and export the user's model, quantize it (PT2E), lower the Q/DQ graph to edgec's IR."""
