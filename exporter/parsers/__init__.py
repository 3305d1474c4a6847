"""Pure parsers: one module per vendor tool output. Text in, frozen dataclasses out, no I/O."""
