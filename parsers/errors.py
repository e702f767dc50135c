"""The one exception every reader raises, so callers need a single except clause."""


class TraceError(Exception):
    """A trace could not be read. The message is one line meant for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
