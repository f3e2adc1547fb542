"""A trained model out to other runtimes and formats, and models of other toolkits in."""


class ExportError(ValueError):
    """A model that the target format cannot express exactly, or a folder it must not write."""
