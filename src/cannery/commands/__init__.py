"""One module per subcommand; each function returns the process exit status."""
