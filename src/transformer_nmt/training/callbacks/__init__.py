"""Lightning callbacks, one module each, named for what it does.

No list here: the folder is the list, and a copy in a docstring falls behind the next callback."""
