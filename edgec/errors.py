"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class EdgecError(Exception):
    """A problem with the user's input (model, shapes, files, options), described in one line."""

    exit_code = 2
