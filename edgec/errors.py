"""The one exception type the CLI turns into a one-line message and a non-zero exit (and its
one refinement the pipeline acts on)."""


class EdgecError(Exception):
    """A problem with the user's input (model, shapes, files, options), described in one line."""

    exit_code = 2


class FloatActivation(EdgecError):
    """A quantized program leaves in float an activation edgec runs in int8; `node` is the
    program's node computing it (the pipeline quantizes it from calibration data)."""

    def __init__(self, message: str, node: str):
        super().__init__(message)
        self.node = node
