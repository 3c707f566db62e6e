"""Small shared utilities with no Keras: errors and exit codes, atomic writes, argument types,
scratch folders, progress lines, quiet imports, native log capture, versions, the backend pick."""
