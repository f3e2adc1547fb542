"""The nmt-* commands: each parses its arguments and hands them to a wing."""
