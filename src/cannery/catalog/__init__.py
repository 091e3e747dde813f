"""The catalog: TOML → validated models → fully resolved image specs."""
